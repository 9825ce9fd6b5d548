import { and, desc, eq, type SQL, type SQLWrapper } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import { EVENTS_LISTED } from "../domain/events.ts";
import { moveOf, onBucket } from "./buckets.ts";
import { type ContextCheck, checkContext } from "./client-context.ts";
import { type Caller, ownerOf, selectCaller, type TokenProof, touch } from "./liveness.ts";
import { type SessionEventRow, sessionEvents } from "./schema.ts";
import type { Place } from "./shards.ts";
import { type Actor, type Logged, loggedBy, newWrite } from "./writes.ts";

/** A user's events, through the one index: under the user's bucket (src/db/schema.ts `bucket`). */
export function eventsOf(bucket: string, userId: string | SQLWrapper): SQL | undefined {
  return and(eq(sessionEvents.bucket, bucket), eq(sessionEvents.userId, userId));
}

/**
 * The caller's user's security log, newest first, after judging the caller's context; caller
 * null when the token is not live, no event when it is held for step-up.
 */
export async function listEvents(
  place: Place,
  proof: TokenProof,
  at: Instant,
  check: ContextCheck | null,
  actor: Actor,
): Promise<Logged<{ caller: Caller | null; events: SessionEventRow[] }>> {
  const write = newWrite(at.now);
  return onBucket(place, async (db) => {
    const [, , , , unrecorded, , callers, events, logged, [move]] = await db.batch([
      ...checkContext(db, proof, at, check, actor, write),
      touch(db, proof, at),
      selectCaller(db, proof, at),
      db
        .select()
        .from(sessionEvents)
        .where(eventsOf(place.bucket, ownerOf(db, proof, at)))
        .orderBy(desc(sessionEvents.createdAt), desc(sessionEvents.id))
        .limit(EVENTS_LISTED),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    const answer = { caller: callers[0] ?? null, events };
    return { answer: { answer, events: logged, db }, move, blocked: unrecorded.length > 0 };
  });
}
