import type { Context } from "hono";
import { isRefusal } from "../../domain/refusal.ts";
import type { SessionView } from "../../domain/session-view.ts";
import { deleteOwnSession, listOwnSessions } from "../../services/own-sessions.ts";
import { clearSessionCookie } from "../cookie.ts";
import { Hono } from "../hono.ts";
import { jsonOfText, jsonText } from "../json-text.ts";
import { requireToken, type TokenEnv } from "../middleware/auth.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { refused } from "../refusals.ts";

async function deleteById<E extends TokenEnv>(c: Context<E>, id: string) {
  const { scope, token } = c.var;
  const outcome = await deleteOwnSession(scope, token, id);
  if (isRefusal(outcome)) throw refused(c, outcome);
  if (id === token.proof.id) clearSessionCookie(c);
  return c.json({ message: "Session deleted" });
}

// `/auth/sessions/` (empty id) must reach the handler for its 400, and a regex without a
// literal "/" keeps Hono's typed client (hc) able to fill the parameter in.
const ID = "/:id{[^\\x2F]*}";

export const sessionsRoutes = new Hono<ScopedEnv>()
  .get("/", requireToken, async (c) => {
    const sessions = await listOwnSessions(c.var.scope, c.var.token);
    if (isRefusal(sessions)) throw refused(c, sessions);
    return jsonOfText<{ sessions: SessionView[]; currentSessionId: string }>(c, {
      sessions,
      currentSessionId: jsonText(c.var.token.proof.id),
    });
  })
  .delete("/", requireToken, (c) => deleteById(c, ""))
  .delete(ID, requireToken, (c) => deleteById(c, c.req.param("id")));
