import {
  AUTH_ERRORS,
  BEARER_OR_COOKIE,
  CHALLENGE,
  CLEARS_COOKIE,
  CROSS_SITE,
  CROSS_SITE_OR_SUPPORT,
  error,
  HELD,
  LOGOUT_RATE_LIMITED,
  METHOD_NOT_ALLOWED,
  message,
  ok,
  type PathItem,
  ref,
} from "../openapi-parts.ts";

/** The OpenAPI document's part (src/http/openapi.ts) for logout.ts: POST and DELETE /auth/logout. */
export const logoutPaths = {
  "/auth/logout": {
    post: {
      operationId: "logout",
      summary: "Ends the session that makes the request",
      security: BEARER_OR_COOKIE,
      responses: {
        "200": ok(
          "Logged out. Clears the cookie when the request carried it.",
          message({ const: "Logged out" }),
          CLEARS_COOKIE,
        ),
        "400": error(
          "The token is malformed, unknown, expired or revoked. Clears a carried cookie.",
          ["session_invalid"],
          CLEARS_COOKIE,
        ),
        "401": error("No token at all.", ["token_required"], CHALLENGE),
        ...CROSS_SITE,
        ...LOGOUT_RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    delete: {
      operationId: "logoutAll",
      summary: "Ends every session of the caller's user, or with scope=others every other one",
      security: BEARER_OR_COOKIE,
      parameters: [ref("parameters/Scope")],
      responses: {
        "200": ok(
          "Logged out. Clears a carried cookie, except with scope=others (the caller stays signed in).",
          message({
            anyOf: [
              { const: "Logged out of all sessions" },
              { pattern: "^Logged out of (1 other session|(0|[2-9]|[1-9][0-9]+) other sessions)$" },
            ],
          }),
          CLEARS_COOKIE,
        ),
        "400": error(
          "The token is malformed (session_invalid); or `scope` is neither omitted nor `others` (invalid_scope: checked once the token proved live, so a dead token still gets the 401 session_invalid; nothing ends). Either clears a carried cookie.",
          ["invalid_scope", "session_invalid"],
          CLEARS_COOKIE,
        ),
        "401": error(
          `No token at all (token_required); or a well-formed token that is unknown, expired or revoked, whatever the \`scope\` (session_invalid, clears a carried cookie); or, only with scope=others and SESSION_STEP_UP_MAX_AGE_SECONDS set, a live token whose last authentication is older than that (reauthentication_required: nothing ended, cookie kept, RFC 9470 challenge with max_age). ${HELD} Cookie kept; POST /auth/logout is never held back.`,
          ["token_required", "session_invalid", "reauthentication_required"],
          {
            ...CHALLENGE,
            ...CLEARS_COOKIE,
          },
        ),
        ...CROSS_SITE_OR_SUPPORT,
        ...LOGOUT_RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;
