import type { Database } from "../db/client.ts";
import { markDelivered, pendingEvents } from "../db/outbox.ts";
import type { EventType, SessionEventRow } from "../db/schema.ts";
import type { Logged } from "../db/writes.ts";

// The optional events queue (binding SESSION_EVENTS). session_events is its outbox: an event
// is written with pending_delivery = 1 in the same batch as the change it records, sent
// after the response, and marked delivered once the queue accepted it. Whatever a failed
// send, a crash or a failed mark leaves pending, the cron sends again, so every event is
// delivered at least once; consumers drop duplicates by `id`.

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
}

declare global {
  interface Env {
    /** Optional Queue producer: every session event is sent to it at least once. */
    SESSION_EVENTS?: Queue<SessionEventMessage>;
  }
}

export interface Outbox {
  /**
   * Called once the batch that wrote `events` to `db` committed; never delays the answer.
   * `db` is where they are marked delivered: the database of the user they belong to.
   */
  publish(db: Database, events: SessionEventRow[]): void;
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
 * whenever it is sent. Every event ever pending carries a request id: only rows logged before
 * the column existed lack one, and those were written not pending.
 */
function messageId(event: Pick<SessionEventRow, "requestId" | "sessionId">): string {
  return `${event.requestId as string}:${event.sessionId}`;
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
  };
}

/** Sends the events, then marks them delivered (one D1 round trip). Throws if either fails. */
async function deliver(queue: Queue<SessionEventMessage>, db: Database, events: SessionEventRow[]): Promise<void> {
  for (let i = 0; i < events.length; i += SEND_CHUNK) {
    await queue.sendBatch(
      events.slice(i, i + SEND_CHUNK).map((event) => ({ body: toMessage(event), contentType: "json" })),
    );
  }
  await markDelivered(
    db,
    events.map((event) => event.id),
  );
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
 * The outbox of one request or RPC call, or null without the binding (then events are
 * written as not pending and nothing is sent). `waitUntil` keeps the send alive after
 * the answer went out.
 */
export function outboxFor(
  queue: Queue<SessionEventMessage> | undefined,
  waitUntil: (promise: Promise<unknown>) => void,
): Outbox | null {
  if (!queue) return null;
  return { publish: (db, events) => waitUntil(deliver(queue, db, events).catch(logFailure)) };
}

/**
 * The cron's pass over one database: sends what is still pending, oldest first, in bounded
 * batches, each started only while `mayStart()` says the run can afford one.
 */
export async function resendPending(
  queue: Queue<SessionEventMessage> | undefined,
  db: Database,
  now: Date,
  mayStart: () => boolean,
): Promise<number> {
  if (!queue) return 0;
  const before = new Date(now.getTime() - RESEND_AFTER_MS);
  let sent = 0;
  for (let batch = 0; batch < RESEND_MAX_BATCHES && mayStart(); batch++) {
    const events = await pendingEvents(db, before, RESEND_BATCH_SIZE);
    if (events.length === 0) break;
    try {
      await deliver(queue, db, events);
    } catch (error) {
      logFailure(error);
      break;
    }
    sent += events.length;
    if (events.length < RESEND_BATCH_SIZE) break;
  }
  return sent;
}
