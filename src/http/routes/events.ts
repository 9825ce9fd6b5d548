import type { ContextChange } from "../../domain/client-context.ts";
import type { EventType } from "../../domain/events.ts";
import { isRefusal } from "../../domain/refusal.ts";
import { listOwnEvents } from "../../services/own-sessions.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { refused } from "../refusals.ts";

export interface EventView {
  id: number;
  type: EventType;
  session_id: string;
  /** The writer's session (src/db/writes.ts), null for the system: the contract's name, not the support agent (`actor`). */
  actor_session_id: string | null;
  ip_address: string | null;
  created_at: string;
  // Beyond the first fields: why the system ended it (`ended`), and whether a `created` came from a new device.
  reason: string | null;
  new_device: boolean | null;
  /** Present only on a context change: where the session was last seen and where it was used from. */
  context?: ContextChange;
  /** Present only when the event's session is support access: the agent acting in it (RFC 8693 `act.sub`). */
  actor?: { sub: string };
  /** Present only when an admin API call caused the event: the id of the key that made it. */
  admin_key_id?: string;
}

/** The caller's security log: sessions created and ended, newest first, bounded. */
export const eventsRoutes = new Hono<ScopedEnv>().get("/", requireToken, async (c) => {
  const events = await listOwnEvents(c.var.scope, c.var.token);
  if (isRefusal(events)) throw refused(c, events);
  const views: EventView[] = events.map((event) => ({
    id: event.id,
    type: event.type,
    session_id: event.sessionId,
    actor_session_id: event.actorSessionId,
    ip_address: event.ipAddress,
    created_at: event.createdAt.toISOString(),
    reason: event.reason,
    new_device: event.newDevice,
    ...(event.context === null ? {} : { context: event.context }),
    ...(event.supportAgent === null ? {} : { actor: { sub: event.supportAgent } }),
    ...(event.adminKeyId === null ? {} : { admin_key_id: event.adminKeyId }),
  }));
  return c.json({ events: views });
});
