import { chunks, type Database } from "../db/client.ts";
import { markDelivered, pendingEvents } from "../db/outbox.ts";
import type { SessionEventRow } from "../db/schema.ts";
import type { Shards } from "../db/shards.ts";
import { expireQueuedSets } from "../db/streams.ts";
import type { Logged } from "../db/writes.ts";
import type { ContextChange } from "../domain/client-context.ts";
import type { EventType } from "../domain/events.ts";
import { readTransmitter, type Transmitter } from "../domain/transmitter.ts";
import { pushDue, queueSets } from "./ssf-delivery.ts";

// Where session events go beyond the security log: the optional events queue (binding
// SESSION_EVENTS) and the Shared Signals streams (SSF_ISSUER). session_events is their outbox:
// an event is written with pending_delivery = 1 in the same batch as the change it records,
// sent after the response, and marked delivered once the queue accepted it and its SETs were
// queued for the streams. Whatever a failed send, a crash or a failed mark leaves pending, the
// cron sends again, so every event is delivered at least once; consumers drop duplicates by
// `id`, receivers by `jti`.

/** What a consumer receives: one message per event. */
export interface SessionEventMessage {
  /** The event's own id, unique across every database and the same each time it is sent again. */
  id: string;
  type: EventType;
  userId: string;
  sessionId: string;
  actorSessionId: string | null;
  ipAddress: string | null;
  reason: string | null;
  newDevice: boolean | null;
  createdAt: string;
  /** Present only on a context change (`context_changed`, `ended` for it): where the session was, where it is now. */
  context?: ContextChange;
}

declare global {
  interface Env {
    /** Optional Queue producer: every session event is sent to it at least once. */
    SESSION_EVENTS?: Queue<SessionEventMessage>;
  }
}

export interface Outbox {
  /** Events are written pending delivery: the cron sends again what was not delivered. */
  readonly pending: boolean;
  /**
   * Called once the batch that wrote `events` to `db` committed; never delays the answer.
   * `db` is where they are marked delivered: the database of the user they belong to.
   */
  publish(db: Database, events: SessionEventRow[]): void;
}

/** Whether a write through `outbox` logs its events pending delivery (`Actor.queued`). */
export function queuedBy(outbox: Outbox | null): boolean {
  return outbox?.pending ?? false;
}

/** Hands the events a committed write logged to the outbox, if any; answers what the write answered. */
export function published<T>(outbox: Outbox | null, { answer, events, db }: Logged<T>): T {
  if (events.length > 0) outbox?.publish(db, events);
  return answer;
}

// A queue's sendBatch takes at most 100 messages.
const SEND_CHUNK = 100;
/** The request path sends its own events at once; the cron leaves them this long to do so. */
export const RESEND_AFTER_MS = 60_000;
export const RESEND_BATCH_SIZE = 100;
export const RESEND_MAX_BATCHES = 10;

/**
 * `<request_id>:<session_id>`. A row id is unique within its database only, so with several
 * databases two events may share one. A write's request id is random and a write logs at
 * most one event per session, so the pair names one event anywhere, and is read from the row
 * whenever it is sent.
 */
function messageId(event: Pick<SessionEventRow, "requestId" | "sessionId">): string {
  return `${event.requestId}:${event.sessionId}`;
}

function toMessage(event: SessionEventRow): SessionEventMessage {
  return {
    id: messageId(event),
    type: event.type,
    userId: event.userId,
    sessionId: event.sessionId,
    actorSessionId: event.actorSessionId,
    ipAddress: event.ipAddress,
    reason: event.reason,
    newDevice: event.newDevice,
    createdAt: event.createdAt.toISOString(),
    ...(event.context === null ? {} : { context: event.context }),
  };
}

/** The outlets configured: the queue, the streams (their database and the transmitter), or both. */
export interface Outlets {
  queue?: Queue<SessionEventMessage>;
  ssf: { streams: Database; transmitter: Transmitter } | null;
}

/** The outlets `env` configures, or null for none (then events are written not pending). */
export function outletsOf(env: Env, shards: Shards): Outlets | null {
  const transmitter = readTransmitter(env);
  const ssf = transmitter && { streams: shards.streams().db, transmitter };
  return env.SESSION_EVENTS || ssf ? { queue: env.SESSION_EVENTS, ssf } : null;
}

// Whether this isolate last saw a stream that is not disabled, and when. With none, a write
// leaves its events not pending (nothing more written than without Shared Signals) and the
// outbox still queues their SETs after the answer, best effort, checking again each time: so a
// stream just created elsewhere gets them all the same, unless this worker stops in between.
const STREAMS_SEEN_FOR_MS = 60_000;
let streamsSeen: { live: boolean; at: number } | null = null;

/** Whether a write's events must be written pending: a queue, or streams that may be live. */
function writesPending({ queue, ssf }: Outlets): boolean {
  if (queue) return true;
  if (!ssf) return false;
  return streamsSeen === null || streamsSeen.live || Date.now() - streamsSeen.at > STREAMS_SEEN_FOR_MS;
}

/**
 * Sends the events to the queue and queues their SETs, then marks the pending ones delivered (a
 * round trip to each database). Throws if any of it fails: the events stay pending, for the cron.
 */
async function deliver({ queue, ssf }: Outlets, db: Database, events: SessionEventRow[]): Promise<void> {
  if (queue) {
    for (const part of chunks(events, SEND_CHUNK))
      await queue.sendBatch(part.map((event) => ({ body: toMessage(event), contentType: "json" })));
  }
  if (ssf) streamsSeen = { live: await queueSets(ssf.streams, ssf.transmitter, events), at: Date.now() };
  await markDelivered(
    db,
    events.filter((event) => event.pendingDelivery).map((event) => event.id),
  );
}

/** Pushes what is due to push streams; a failure leaves the SETs queued for the next round. */
async function push({ ssf }: Outlets, now: Date): Promise<void> {
  if (ssf) await pushDue(ssf.streams, ssf.transmitter, now).catch(logFailure);
}

function logFailure(error: unknown): void {
  // Only the class name, as for any failure: the events stay pending for the cron.
  console.error(
    JSON.stringify({
      level: "warn",
      event: "outbox_send_failed",
      name: error instanceof Error ? error.name : typeof error,
    }),
  );
}

/**
 * The outbox of one request or RPC call, or null without outlets. `waitUntil` keeps the
 * sending alive after the answer went out.
 */
export function outboxFor(outlets: Outlets | null, waitUntil: (promise: Promise<unknown>) => void): Outbox | null {
  if (!outlets) return null;
  return {
    pending: writesPending(outlets),
    publish: (db, events) =>
      waitUntil(
        deliver(outlets, db, events)
          .then(() => push(outlets, new Date()))
          .catch(logFailure),
      ),
  };
}

/**
 * The cron's pass over one database: sends what is still pending, oldest first, in bounded
 * batches, each started only while `mayStart()` says the run can afford one.
 */
export async function resendPending(
  outlets: Outlets | null,
  db: Database,
  now: Date,
  mayStart: () => boolean,
): Promise<number> {
  if (!outlets) return 0;
  const before = new Date(now.getTime() - RESEND_AFTER_MS);
  let sent = 0;
  for (let batch = 0; batch < RESEND_MAX_BATCHES && mayStart(); batch++) {
    const events = await pendingEvents(db, before, RESEND_BATCH_SIZE);
    if (events.length === 0) break;
    try {
      await deliver(outlets, db, events);
    } catch (error) {
      logFailure(error);
      break;
    }
    sent += events.length;
    if (events.length < RESEND_BATCH_SIZE) break;
  }
  return sent;
}

/**
 * The minute cron: events still pending on any database (a write whose sending failed, or an
 * operator's command, which sends nothing itself), then the pushes now due.
 */
export async function deliverPending(outlets: Outlets | null, databases: Database[], now: Date): Promise<void> {
  if (!outlets) return;
  for (const db of databases) await resendPending(outlets, db, now, () => true).catch(logFailure);
  await push(outlets, now);
}

/**
 * For writes made outside the worker (the operator's commands): their events are written
 * pending and left to the worker's minute cron, which holds the queue and the signing keys.
 */
export const LEFT_TO_THE_CRON: Outbox = { pending: true, publish: () => {} };

/** The purge's part: SETs past the transmitter's retention are dropped, each stream's loss logged. */
export async function expireSets(outlets: Outlets | null, now: Date): Promise<number> {
  if (!outlets?.ssf) return 0;
  const cutoff = new Date(now.getTime() - outlets.ssf.transmitter.retentionDays * 86_400_000);
  const lost = await expireQueuedSets(outlets.ssf.streams, cutoff, now);
  for (const { streamId, dropped } of lost)
    console.warn(JSON.stringify({ level: "warn", event: "ssf_sets_expired", stream: streamId, dropped }));
  return lost.reduce((sum, { dropped }) => sum + dropped, 0);
}
