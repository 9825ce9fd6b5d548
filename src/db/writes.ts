import { and, eq, gte, type SQL, sql } from "drizzle-orm";
import type { SelectedFields } from "drizzle-orm/sqlite-core";
import type { EventType } from "../domain/events.ts";
import { notMoving } from "./buckets.ts";
import type { Database } from "./client.ts";
import { firstEventId, type SessionEventRow, sessionEvents, sessions } from "./schema.ts";

// How every write is built. Each exported operation of the statements (sessions.ts,
// issuing.ts, events.ts, device-binding.ts) is exactly one D1 round trip: authentication
// travels inside the statement (as a subquery) or in the same batch, and a batch runs as one
// transaction, so its statements see one consistent table.
//
// A transient error is retried once by replaying the batch (src/db/d1.ts), and the
// first attempt may have committed with only its answer lost. So a write never answers
// from what its own attempt changed (a replay changes nothing): it tags the events it
// writes with its `Write` (bound into the batch, so the same on the replay) and answers
// from the events carrying it, read back at the end of the batch: what either attempt did.

/** Who is acting, for the security log, and whether the events it causes also go to the events queue. */
export interface Actor {
  sessionId: string | null;
  ipAddress: string | null;
  /** The events queue is configured: events are written pending delivery, for the outbox to send. */
  queued: boolean;
}

/**
 * What a write answers, and the events it logged: the caller hands them to the events queue
 * (src/services/outbox.ts) once the batch committed. `db` is the database they are on, where
 * they are marked delivered: the one the write ended up running on.
 */
export interface Logged<T> {
  answer: T;
  events: SessionEventRow[];
  db: Database;
}

/**
 * One write operation: a random id and its instant, stamped on every event it logs. Events
 * are found again by `created_at` (indexed) and then the id, so the id needs no index.
 */
export interface Write {
  id: string;
  at: Date;
}

export function newWrite(at: Date): Write {
  return { id: crypto.randomUUID(), at };
}

/**
 * The ids of the events a statement logs at `at`: from firstEventId(at), or the last id
 * + 1 when one is already there (another event of that millisecond, or a clock ahead of this
 * one), one per row. So the table stays in time order and a write's events are found by id.
 */
function eventIds(db: Database, at: Date): SQL<number> {
  const floor = firstEventId(at);
  const last = db
    .select({ id: sql`max(${sessionEvents.id})` })
    .from(sessionEvents)
    .where(gte(sessionEvents.id, floor));
  return sql<number>`coalesce((${last}) + 1, ${floor}) + row_number() OVER () - 1`;
}

/** What an event records beyond who acted: why the system ended it, whether it was a new device. */
export interface EventDetails {
  reason?: string | null;
  newDevice?: SQL<boolean>;
  /**
   * Given by a write that may change the session's level (a re-authentication; null keeps the
   * level): the event then records the level before as well.
   */
  assuranceLevel?: number | null;
  /** A context change (src/db/client-context.ts): the JSON of the `context` column. */
  context?: SQL;
}

/**
 * Logs an event of `type` for every session matching `matching`. An ending runs in the same
 * batch just before the DELETE with the same condition, so the log and the change cannot
 * disagree.
 */
export function recordEvents(
  db: Database,
  type: EventType,
  matching: SQL | undefined,
  actor: Actor,
  write: Write,
  details: EventDetails = {},
) {
  // Every column the insert writes, in the table's order. As SQL, since drizzle's check of an
  // INSERT … SELECT also asks for the computed `bucket`, which it then (rightly) does not insert.
  const row: { [K in Exclude<keyof SessionEventRow, "bucket">]: SelectedFields[string] } = {
    id: eventIds(db, write.at).as("id"),
    userId: sessions.userId,
    type: sql<EventType>`${type}`.as("type"),
    sessionId: sessions.id,
    actorSessionId: sql<string | null>`${actor.sessionId}`.as("actor_session_id"),
    ipAddress: sql<string | null>`${actor.ipAddress}`.as("ip_address"),
    createdAt: sql<Date>`${write.at.getTime()}`.as("created_at"),
    requestId: sql<string>`${write.id}`.as("request_id"),
    reason: sql<string | null>`${details.reason ?? null}`.as("reason"),
    deviceKey: sessions.deviceKey,
    newDevice: (details.newDevice ?? sql<boolean | null>`NULL`).as("new_device"),
    // Read before the batch's UPDATE: the level the session had until this event.
    assuranceLevel: sql<number | null>`coalesce(${details.assuranceLevel ?? null}, ${sessions.assuranceLevel})`.as(
      "assurance_level",
    ),
    previousAssuranceLevel: sql<
      number | null
    >`${details.assuranceLevel === undefined ? null : sessions.assuranceLevel}`.as("previous_assurance_level"),
    context: (details.context ?? sql`NULL`).as("context"),
    pendingDelivery: sql<boolean>`${actor.queued ? 1 : 0}`.as("pending_delivery"),
  };
  return db.insert(sessionEvents).select(
    db
      .select(row)
      .from(sessions)
      .where(and(matching, notMoving(db)))
      .getSQL(),
  );
}

/** The DELETE that follows `recordEvents` in an ending's batch: the same condition, the same guard. */
export function endSessions(db: Database, ending: SQL | undefined) {
  return db.delete(sessions).where(and(ending, notMoving(db)));
}

/**
 * The events `write` has logged so far, by either attempt: the last statement of each
 * writing batch, and what the queue is handed. Only this write uses its id, so a row here
 * also proves that the caller's token was live when the attempt that wrote it ran.
 */
export function loggedBy(db: Database, write: Write) {
  return db
    .select()
    .from(sessionEvents)
    .where(
      and(
        gte(sessionEvents.id, firstEventId(write.at)),
        eq(sessionEvents.createdAt, write.at),
        eq(sessionEvents.requestId, write.id),
      ),
    );
}
