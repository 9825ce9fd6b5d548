import type { Context } from "hono";
import { deleteOwnSession, listOwnSessions } from "../../services/own-sessions.ts";
import type { AppEnv } from "../context.ts";
import { clearSessionCookie } from "../cookie.ts";
import { ApiError, reauthenticationRequired, supportRefused, unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";

async function deleteById(c: Context<AppEnv>, id: string) {
  const { scope, token } = c.var;
  const outcome = await deleteOwnSession(scope, token, id);
  if (outcome === "invalid_token") throw unauthorized("invalid_token", true);
  if (outcome === "id_required") throw new ApiError(400, "session_id_required");
  if (outcome === "step_up") throw reauthenticationRequired(scope.config.stepUpMaxAgeSeconds);
  if (outcome === "not_authorized") throw unauthorized("not_authorized", false);
  if (outcome === "support") throw supportRefused();
  if (id === token.proof.id) clearSessionCookie(c);
  return c.json({ message: "Session deleted" });
}

// `/auth/sessions/` (empty id) must reach the handler for its 400, and a regex without a
// literal "/" keeps Hono's typed client (hc) able to fill the parameter in.
const ID = "/:id{[^\\x2F]*}";

export const sessionsRoutes = new Hono<AppEnv>()
  .get("/", requireToken, async (c) => {
    const sessions = await listOwnSessions(c.var.scope, c.var.token);
    if (!sessions) throw unauthorized("invalid_token", true);
    if (sessions === "step_up") throw reauthenticationRequired(c.var.scope.config.stepUpMaxAgeSeconds);
    return c.json({ sessions, currentSessionId: c.var.token.proof.id });
  })
  .delete("/", requireToken, (c) => deleteById(c, ""))
  .delete(ID, requireToken, (c) => deleteById(c, c.req.param("id")));
