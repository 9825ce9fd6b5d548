import type { Context } from "hono";
import { isRefusal } from "../../domain/refusal.ts";
import type { SessionView } from "../../domain/session-view.ts";
import { deleteOwnSession, listOwnSessions } from "../../services/own-sessions.ts";
import { clearSessionCookie } from "../cookie.ts";
import { jsonOfText, jsonText } from "../json-text.ts";
import type { TokenEnv } from "../middleware/auth.ts";
import {
  CHALLENGE,
  CLEARS_COOKIE,
  CROSS_SITE_OR_SUPPORT,
  error,
  HELD,
  message,
  NO_TOKEN,
  ok,
  ref,
} from "../openapi-parts.ts";
import { refused } from "../refusals.ts";
import { declare, TOKEN } from "../route.ts";

async function deleteById<E extends TokenEnv>(c: Context<E>, id: string) {
  const { scope, token } = c.var;
  const outcome = await deleteOwnSession(scope, token, id);
  if (isRefusal(outcome)) throw refused(c, outcome);
  if (id === token.proof.id) clearSessionCookie(c);
  return c.json({ message: "Session deleted" });
}

/** The document's `parameters/SessionId`; the id is read as sent, and its rules are the deletion's (`deleteOwnSession`). */
export const SESSION_ID_PARAMETER = {
  name: "id",
  in: "path",
  required: true,
  description:
    "A session id from the list. Empty or blank: 400 session_id_required; anything else that is not a live session of the caller's user: 401 not_authorized.",
  schema: { type: "string" },
};

/** GET /auth/sessions and DELETE /auth/sessions/{id}. */
export const SESSIONS_ROUTES = [
  declare({
    method: "get",
    path: "/auth/sessions",
    credential: TOKEN,
    operationId: "listSessions",
    summary: "The caller's live sessions, newest first",
    answers: {
      "200": ok(
        "Live sessions (`expires_at` in the future), newest `created_at` first, ties by `id` descending.",
        ref("schemas/SessionList"),
      ),
    },
    handler: async (c) => {
      const sessions = await listOwnSessions(c.var.scope, c.var.token);
      if (isRefusal(sessions)) throw refused(c, sessions);
      return jsonOfText<{ sessions: SessionView[]; currentSessionId: string }>(c, {
        sessions,
        currentSessionId: jsonText(c.var.token.proof.id),
      });
    },
  }),
  declare({
    method: "delete",
    path: "/auth/sessions",
    credential: TOKEN,
    operationId: "deleteSessionWithoutId",
    summary: "Always refused: the session id is missing (after authentication)",
    answers: { "400": error("Authenticated, but no session id was given.", ["session_id_required"]) },
    handler: (c) => deleteById(c, ""),
  }),
  // `/auth/sessions/` (empty id) must reach the handler for its 400, and a regex without a
  // literal "/" keeps Hono's typed client (hc) able to fill the parameter in.
  declare({
    method: "delete",
    path: "/auth/sessions/:id{[^\\x2F]*}",
    credential: TOKEN,
    operationId: "deleteSession",
    summary: "Ends one of the caller's sessions",
    parameters: { id: { doc: ref("parameters/SessionId"), read: (c) => c.req.param("id") ?? "" } },
    answers: {
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
    },
    handler: (c, { id }) => deleteById(c, id),
  }),
] as const;
