import type { Context } from "hono";
import { isRefusal } from "../../domain/refusal.ts";
import { deleteOwnSession, listOwnSessions } from "../../services/own-sessions.ts";
import type { AppEnv } from "../app-env.ts";
import { clearSessionCookie } from "../cookie.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";
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
import { refused } from "../refusals.ts";

async function deleteById(c: Context<AppEnv>, id: string) {
  const { scope, token } = c.var;
  const outcome = await deleteOwnSession(scope, token, id);
  if (isRefusal(outcome)) throw refused(c, outcome);
  if (id === token.proof.id) clearSessionCookie(c);
  return c.json({ message: "Session deleted" });
}

// `/auth/sessions/` (empty id) must reach the handler for its 400, and a regex without a
// literal "/" keeps Hono's typed client (hc) able to fill the parameter in.
const ID = "/:id{[^\\x2F]*}";

export const sessionsRoutes = new Hono<AppEnv>()
  .get("/", requireToken, async (c) => {
    const sessions = await listOwnSessions(c.var.scope, c.var.token);
    if (isRefusal(sessions)) throw refused(c, sessions);
    return c.json({ sessions, currentSessionId: c.var.token.proof.id });
  })
  .delete("/", requireToken, (c) => deleteById(c, ""))
  .delete(ID, requireToken, (c) => deleteById(c, c.req.param("id")));

/** This file's part of the OpenAPI document (src/http/openapi.ts): GET /auth/sessions and DELETE /auth/sessions/{id}. */
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
