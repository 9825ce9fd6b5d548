import { and, desc, eq, type SQL, type SQLWrapper } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import { EVENTS_LISTED } from "../domain/events.ts";
import { authenticated, type ByToken, callerAndMove } from "./authenticated.ts";
import { onBucket } from "./buckets.ts";
import { batchNamed } from "./client.ts";
import type { ContextCheck } from "./client-context.ts";
import { type Caller, ownerOf, type TokenProof } from "./liveness.ts";
import { type SessionEventRow, sessionEvents } from "./schema.ts";
import type { Place } from "./shards.ts";
import { type Logged, newWrite, type Writer } from "./writes.ts";

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
  writer: Writer,
): Promise<Logged<{ caller: Caller | null; events: SessionEventRow[] }>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  return onBucket(place, async (db) => {
    const head = authenticated(db, token, true);
    const { contextEvents, read, events } = await batchNamed(db, {
      ...head.statements,
      read: head.callerRow("events", place.bucket),
      events: db
        .select()
        .from(sessionEvents)
        .where(eventsOf(place.bucket, ownerOf(proof, at)))
        .orderBy(desc(sessionEvents.createdAt), desc(sessionEvents.id))
        .limit(EVENTS_LISTED),
    });
    const { caller, move } = callerAndMove(read[0]);
    const answer = { caller, events };
    return {
      answer: { answer, events: head.events(contextEvents), db },
      move,
      blocked: caller?.contextUnrecorded === true,
    };
  });
}
