import { and, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { EventType } from "../domain/events.ts";
import { notMoving } from "./buckets.ts";
import type { Database } from "./client.ts";
import { millis, type When } from "./compiled.ts";
import { EVENT_IDS_PER_MS, type SessionEventRow, sessionEvents, sessions } from "./schema.ts";

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

/** Who wrote a row, for the security log (not the support agent, `actor`), and whether the events it causes also go to the events queue. */
/** Which events a write logs pending delivery, as `Writer.queued` says. */
function pendingOf(queued: Writer["queued"]): SQL {
  if (queued === "upstream") return sql`${sessions.upstream} IS NOT NULL`;
  if (queued === "provider") return sql`(${sessions.upstream} IS NOT NULL AND ${sessions.organizationId} IS NOT NULL)`;
  return sql`${queued ? 1 : 0}`;
}

export interface Writer {
  sessionId: string | null;
  ipAddress: string | null;
  /**
   * Which events are written pending delivery, for the outbox to send: all (the events queue,
   * streams that may be live), none, or `upstream`, those of sessions signed in through an
   * upstream (one takes pushes, nothing else needs them): a session without one pays nothing;
   * or `provider`, those signed in through an organization's provider (which may take pushes:
   * src/services/organizations/acting-providers.ts reads whether when they are sent).
   */
  queued: boolean | "upstream" | "provider";
  /**
   * Whether its events go to an outbox at all (src/services/outbox.ts): without one (no queue,
   * no Shared Signals), nothing reads them back, so a statement that logs them returns none.
   */
  published: boolean;
  /** The admin key whose call this is (its id, src/domain/admin-keys.ts); null for every other entry point. */
  adminKeyId: string | null;
}

/**
 * An event as a write hands it to the outbox. `reportToken`: only on a new device's `created`
 * from `create` (src/services/issue-session.ts), the report token in clear, for the events
 * queue's message; it is in no row and never in a log.
 */
export type OutgoingEvent = SessionEventRow & { reportToken?: string };

/**
 * What a write answers, and the events it logged: the caller hands them to the events queue
 * (src/services/outbox.ts) once the batch committed. `db` is the database they are on, where
 * they are marked delivered: the one the write ended up running on.
 */
export interface Logged<T> {
  answer: T;
  events: OutgoingEvent[];
  db: Database;
}

/**
 * One write operation: a random id and its instant (a placeholder in a statement rendered
 * once, src/db/compiled.ts), stamped on every event it logs. Events are found again by
 * `created_at` (indexed) and then the id, so the id needs no index.
 */
export interface Write {
  id: string;
  at: When;
}

export function newWrite(at: Date): Write & { at: Date } {
  return { id: crypto.randomUUID(), at };
}

/**
 * The ids of the events a statement logs at `at`: from firstEventId(at), or the last id
 * + 1 when one is already there (another event of that millisecond, or a clock ahead of this
 * one), one per row. So the table stays in time order and a write's events are found by id.
 * `one`: the statement logs one event at most, which needs no numbering (a window function is
 * a good part of compiling a statement: BENCHMARKS.md, The judged request's SQL).
 */
function eventIds(at: When, one: boolean): SQL<number> {
  // firstEventId(at), in SQL: the instant may be a placeholder (src/db/compiled.ts).
  const floor = sql`${millis(at)} * ${EVENT_IDS_PER_MS}`;
  const first = sql<number>`coalesce((SELECT max(${sessionEvents.id}) FROM ${sessionEvents} WHERE ${sessionEvents.id} >= ${floor}) + 1, ${floor})`;
  return one ? first : sql<number>`${first} + row_number() OVER () - 1`;
}

/** What an event records beyond who acted: why the system ended it, whether it was a new device. */
export interface EventDetails {
  /** A value, or SQL choosing it per session (a context change: the policy that applied). */
  reason?: string | null | SQL<string>;
  newDevice?: SQL<boolean>;
  /**
   * Given by a write that may change the session's level (a re-authentication; null keeps the
   * level): the event then records the level before as well.
   */
  assuranceLevel?: number | null;
  /** A context change (src/db/client-context.ts): the JSON of the `context` column. */
  context?: SQL;
  /** A creation: the session's report hash, kept in its event (src/db/schema.ts). */
  reportHash?: SQL;
}

/**
 * Logs an event of `type` for every session matching `matching`; `joined`, a one-row table its
 * details and `matching` read too (src/db/client-context.ts `judgement`), for a `matching` of
 * the caller's session alone (src/db/authenticated.ts): one event at most. An ending runs in the same
 * batch just before the DELETE with the same condition, so the log and the change cannot
 * disagree.
 */
export function recordEvents(
  db: Database,
  type: EventType | SQL<EventType>,
  matching: SQL | undefined,
  writer: Writer,
  write: Write,
  details: EventDetails = {},
  joined?: SQL,
) {
  // Every column the insert writes, in the table's order (drizzle names them, leaving out the
  // computed `bucket`), as one flat template: it is built on every write.
  const row: { [K in Exclude<keyof SessionEventRow, "bucket">]: SQLWrapper } = {
    id: eventIds(write.at, joined !== undefined),
    userId: sessions.userId,
    type: typeof type === "string" ? sql`${type}` : type,
    sessionId: sessions.id,
    actorSessionId: sql`${writer.sessionId}`,
    ipAddress: sql`${writer.ipAddress}`,
    createdAt: sql`${millis(write.at)}`,
    requestId: sql`${write.id}`,
    reason: sql`${details.reason ?? null}`,
    deviceKey: sessions.deviceKey,
    newDevice: details.newDevice ?? sql`NULL`,
    // Read before the batch's UPDATE: the level the session had until this event.
    assuranceLevel: sql`coalesce(${details.assuranceLevel ?? null}, ${sessions.assuranceLevel})`,
    previousAssuranceLevel: details.assuranceLevel === undefined ? sql`NULL` : sessions.assuranceLevel,
    context: details.context ?? sql`NULL`,
    supportAgent: sessions.supportAgent,
    pendingDelivery: pendingOf(writer.queued),
    adminKeyId: sql`${writer.adminKeyId}`,
    reportHash: details.reportHash ?? sql`NULL`,
    upstream: sessions.upstream,
    upstreamSubject: sessions.upstreamSubject,
    upstreamSid: sessions.upstreamSid,
    organizationId: sessions.organizationId,
  };
  const where = matching ? sql`${matching} AND ${notMoving()}` : notMoving();
  return db
    .insert(sessionEvents)
    .select(
      sql`SELECT ${sql.join(Object.values(row), sql`, `)} FROM ${sessions}${joined ? sql`, ${joined}` : sql``} WHERE ${where}`,
    );
}

/** The DELETE that follows `recordEvents` in an ending's batch: the same condition, the same guard. */
export function endSessions(db: Database, ending: SQL | undefined) {
  return db.delete(sessions).where(and(ending, notMoving()));
}

/**
 * The events `write` has logged so far, by either attempt: the last statement of each
 * writing batch, and what the queue is handed. Only this write uses its id, so a row here
 * also proves that the caller's token was live when the attempt that wrote it ran.
 */
export function loggedBy(db: Database, write: Write) {
  // firstEventId(write.at), in SQL: the instant may be a placeholder (src/db/compiled.ts).
  const at = millis(write.at);
  return db
    .select()
    .from(sessionEvents)
    .where(
      sql`${sessionEvents.id} >= ${at} * ${EVENT_IDS_PER_MS} AND ${sessionEvents.createdAt} = ${at} AND ${sessionEvents.requestId} = ${write.id}`,
    );
}
