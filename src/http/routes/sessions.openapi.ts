import {
  AUTH_ERRORS,
  BEARER_OR_COOKIE,
  CHALLENGE,
  CLEARS_COOKIE,
  CROSS_SITE,
  CROSS_SITE_OR_SUPPORT,
  error,
  HELD,
  METHOD_NOT_ALLOWED,
  message,
  NO_TOKEN,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";

/** The OpenAPI document's part (src/http/openapi.ts) for sessions.ts: GET /auth/sessions and DELETE /auth/sessions/{id}. */
export const sessionsPaths = {
  "/auth/sessions": {
    get: {
      operationId: "listSessions",
      summary: "The caller's live sessions, newest first",
      security: BEARER_OR_COOKIE,
      responses: {
        "200": ok(
          "Live sessions (`expires_at` in the future), newest `created_at` first, ties by `id` descending.",
          ref("schemas/SessionList"),
        ),
        "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
        ...CROSS_SITE,
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    delete: {
      operationId: "deleteSessionWithoutId",
      summary: "Always refused: the session id is missing (after authentication)",
      security: BEARER_OR_COOKIE,
      responses: {
        "400": error("Authenticated, but no session id was given.", ["session_id_required"]),
        "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
        ...CROSS_SITE,
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  "/auth/sessions/{id}": {
    parameters: [ref("parameters/SessionId")],
    delete: {
      operationId: "deleteSession",
      summary: "Ends one of the caller's sessions",
      security: BEARER_OR_COOKIE,
      responses: {
        "200": ok(
          "The session ended. Clears the cookie when it was the caller's own session.",
          message({ const: "Session deleted" }),
          CLEARS_COOKIE,
        ),
        "400": error("Authenticated, but the id is empty or blank.", ["session_id_required"]),
        "401": error(
          `${NO_TOKEN} Or (not_authorized) the id is unknown, expired, or another user's session. Or (reauthentication_required, only with SESSION_STEP_UP_MAX_AGE_SECONDS set) the id is another session and the caller's last authentication is older than that: nothing ended, sign in again (RFC 9470 challenge with max_age). ${HELD} Deleting its own session is never held back.`,
          ["invalid_token", "not_authorized", "reauthentication_required"],
          CHALLENGE,
        ),
        ...CROSS_SITE_OR_SUPPORT,
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;
