import { and, inArray, lt, lte } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import type { Database } from "./client.ts";
import { firstEventId, sessionEvents, sessions } from "./schema.ts";

/**
 * Deletes up to `limit` expired sessions; returns how many went. Idle ones are refused and
 * unlisted already (`isLive`), and go when they expire: no index on last_active_at to find them.
 */
export async function purgeSessions(db: Database, at: Instant, limit: number): Promise<number> {
  const batch = db.select({ id: sessions.id }).from(sessions).where(lte(sessions.expiresAt, at.now)).limit(limit);
  const result = await db.delete(sessions).where(inArray(sessions.id, batch)).run();
  return result.meta.changes;
}

/**
 * Deletes up to `limit` security events from `before` or earlier, oldest id first; returns how
 * many went. By id: every such event has an id below firstEventId(before + 1 ms) but one
 * a clock ahead or a move numbered later, which goes in a later run.
 */
export async function purgeEvents(db: Database, before: Date, limit: number): Promise<number> {
  const old = db
    .select({ id: sessionEvents.id })
    .from(sessionEvents)
    .where(and(lt(sessionEvents.id, firstEventId(before.getTime() + 1)), lte(sessionEvents.createdAt, before)))
    .orderBy(sessionEvents.id)
    .limit(limit);
  const result = await db.delete(sessionEvents).where(inArray(sessionEvents.id, old)).run();
  return result.meta.changes;
}
