import { and, inArray, lte, sql } from "drizzle-orm";
import { batchAll, chunks, type Database } from "./client.ts";
import { type SessionEventRow, sessionEvents } from "./schema.ts";

/** The oldest events the queue has not accepted, written before `before`. */
export async function pendingEvents(db: Database, before: Date, limit: number): Promise<SessionEventRow[]> {
  return (
    db
      .select()
      .from(sessionEvents)
      // A literal 1, so SQLite can use the partial index session_events_pending_idx.
      .where(and(sql`${sessionEvents.pendingDelivery} = 1`, lte(sessionEvents.createdAt, before)))
      .orderBy(sessionEvents.id)
      .limit(limit)
  );
}

// D1 binds at most 100 values per statement.
const MARK_CHUNK = 90;

/** Marks events the queue accepted; one batch however many (each statement under D1's 100 bound values). */
export async function markDelivered(db: Database, ids: number[]): Promise<void> {
  await batchAll(
    db,
    chunks(ids, MARK_CHUNK).map((part) =>
      db.update(sessionEvents).set({ pendingDelivery: sql`0` }).where(inArray(sessionEvents.id, part)),
    ),
  );
}
