import { and, desc, eq, type SQL, type SQLWrapper } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import { EVENTS_LISTED } from "../domain/events.ts";
import { moveOf, onBucket } from "./buckets.ts";
import { ownerOf, selectCaller, type TokenProof, touch } from "./liveness.ts";
import { sessionEvents } from "./schema.ts";
import type { Place } from "./shards.ts";

/** A user's events, through the one index: under the user's bucket (src/db/schema.ts `bucket`). */
export function eventsOf(bucket: string, userId: string | SQLWrapper): SQL | undefined {
  return and(eq(sessionEvents.bucket, bucket), eq(sessionEvents.userId, userId));
}

/** The caller's user's security log, newest first; caller null when the token is not live. */
export async function listEvents(place: Place, proof: TokenProof, at: Instant) {
  return onBucket(place, async (db) => {
    const [, callers, events, [move]] = await db.batch([
      touch(db, proof, at),
      selectCaller(db, proof, at),
      db
        .select()
        .from(sessionEvents)
        .where(eventsOf(place.bucket, ownerOf(db, proof, at)))
        .orderBy(desc(sessionEvents.createdAt), desc(sessionEvents.id))
        .limit(EVENTS_LISTED),
      moveOf(db, place.bucket),
    ]);
    return { answer: { caller: callers[0] ?? null, events }, move, blocked: false };
  });
}
