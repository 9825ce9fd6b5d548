import type { ContextChange } from "./client-context.ts";
import type { EventType } from "./events.ts";

/** An event of the security log: GET /auth/events, written by src/db/event-view.ts. */
export interface EventView {
  id: number;
  type: EventType;
  session_id: string;
  /** The writer's session (src/db/writes.ts), null for the system: the contract's name, not the support agent (`actor`). */
  actor_session_id: string | null;
  ip_address: string | null;
  created_at: string;
  // Beyond the first fields: why the system ended it (`ended`), or that a `created` session ends at its
  // provider's `session_expiry`; and whether a `created` came from a new device.
  reason: string | null;
  new_device: boolean | null;
  /** Present only on a context change: where the session was last seen and where it was used from. */
  context?: ContextChange;
  /** Present only when the event's session is support access: the agent acting in it (RFC 8693 `act.sub`). */
  actor?: { sub: string };
  /** Present only when an admin API call caused the event: the id of the key that made it. */
  admin_key_id?: string;
}
