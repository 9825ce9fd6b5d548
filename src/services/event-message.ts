import type { SessionEventRow } from "../db/schema.ts";
import type { Logged, OutgoingEvent } from "../db/writes.ts";
import type { ContextChange } from "../domain/client-context.ts";
import type { EventType } from "../domain/events.ts";

// The events queue's message (SESSION_EVENTS, src/services/outbox.ts): what a consumer of the
// queue is promised, one message per session event.

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
  /** Present only when the event's session is support access: the agent acting in it (RFC 8693 `act.sub`). */
  actor?: { sub: string };
  /**
   * Present only on `created` from a new device, as `create` sends it: the report token for
   * the "new sign-in" message (src/services/report.ts). It exists in clear only in `create`'s
   * memory, so a message the cron sends again (the first send failed) has none.
   */
  reportToken?: string;
}

/** `create`'s write, its new device's `created` event carrying the report token. */
export function withReportToken<T>(logged: Logged<T>, reportToken: string): Logged<T> {
  const events = logged.events.map(
    (event): OutgoingEvent =>
      event.type === "created" && event.reportHash !== null ? { ...event, reportToken } : event,
  );
  return { ...logged, events };
}

/**
 * `<request_id>:<session_id>`. A row id is unique within its database only, so with several
 * databases two events may share one. A write's request id is random and a write logs at
 * most one event per session, so the pair names one event anywhere, and is read from the row
 * whenever it is sent.
 */
function messageId(event: Pick<SessionEventRow, "requestId" | "sessionId">): string {
  return `${event.requestId}:${event.sessionId}`;
}

export function toMessage(event: OutgoingEvent): SessionEventMessage {
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
    ...(event.supportAgent === null ? {} : { actor: { sub: event.supportAgent } }),
    ...(event.reportToken === undefined ? {} : { reportToken: event.reportToken }),
  };
}
