import { EVENTS_LISTED } from "../../domain/events.ts";
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

/** The OpenAPI document's part (src/http/openapi.ts) for events.ts: GET /auth/events. */
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
