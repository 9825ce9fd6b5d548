import type { ContextChange } from "../../domain/client-context.ts";
import type { EventType } from "../../domain/events.ts";
import { EVENTS_LISTED } from "../../domain/events.ts";
import { isRefusal } from "../../domain/refusal.ts";
import { listOwnEvents } from "../../services/own-sessions.ts";
import type { AppEnv } from "../app-env.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";
import {
  AUTH_ERRORS,
  BEARER_OR_COOKIE,
  CHALLENGE,
  CROSS_SITE,
  error,
  HELD,
  METHOD_NOT_ALLOWED,
  NO_TOKEN,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";
import { refused } from "../refusals.ts";

export interface EventView {
  id: number;
  type: EventType;
  session_id: string;
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
}

/** The caller's security log: sessions created and ended, newest first, bounded. */
export const eventsRoutes = new Hono<AppEnv>().get("/", requireToken, async (c) => {
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
  }));
  return c.json({ events: views });
});

/** This file's part of the OpenAPI document (src/http/openapi.ts): GET /auth/events. */
export const eventsPaths = {
  "/auth/events": {
    get: {
      operationId: "listEvents",
      summary: "The security log of the caller's user: sessions created and ended, newest first",
      security: BEARER_OR_COOKIE,
      responses: {
        "200": ok(
          `At most ${EVENTS_LISTED} events, newest \`created_at\` first, ties by \`id\` descending.`,
          ref("schemas/EventList"),
        ),
        "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
        ...CROSS_SITE,
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;
