import type { Context } from "hono";
import { isStale } from "../../db/liveness.ts";
import { authenticate, deleteSession, listSessionsByToken } from "../../db/sessions.ts";
import { sessionView } from "../../domain/session-view.ts";
import { published } from "../../services/outbox.ts";
import type { AppEnv } from "../context.ts";
import { clearSessionCookie } from "../cookie.ts";
import { ApiError, reauthenticationRequired, unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import { actorOf, requireBearer } from "../middleware/auth.ts";

async function deleteById(c: Context<AppEnv>, id: string) {
  const { place, proof, at, shards } = c.var;
  // A session of the caller's user lives in the caller's database, so an id naming another
  // one (or none) cannot be the caller's to delete: no other database is asked.
  if (id.trim() === "" || shards.forSession(id)?.binding !== place.binding) {
    // Nothing to delete, but authentication still comes first (the caller learns nothing).
    if (!(await authenticate(place, proof, at))) throw unauthorized("invalid_token", true);
    if (id.trim() === "") throw new ApiError(400, "session_id_required");
    throw unauthorized("not_authorized", false);
  }
  const { proven, deleted, caller } = published(c.var.outbox, await deleteSession(place, proof, id, actorOf(c), at));
  if (!proven) throw unauthorized("invalid_token", true);
  if (!deleted && id !== proof.id && isStale(caller, at))
    throw reauthenticationRequired(c.var.config.stepUpMaxAgeSeconds);
  if (!deleted) throw unauthorized("not_authorized", false);
  if (id === proof.id) clearSessionCookie(c);
  return c.json({ message: "Session deleted" });
}

// `/auth/sessions/` (empty id) must reach the handler for its 400, and a regex without a
// literal "/" keeps Hono's typed client (hc) able to fill the parameter in.
const ID = "/:id{[^\\x2F]*}";

export const sessionsRoutes = new Hono<AppEnv>()
  .get("/", requireBearer, async (c) => {
    const { place, proof, at } = c.var;
    const rows = await listSessionsByToken(place, proof, at);
    // The caller's own live session is always among them, so none means the token is dead.
    if (rows.length === 0) throw unauthorized("invalid_token", true);
    return c.json({ sessions: rows.map(sessionView), currentSessionId: proof.id });
  })
  .delete("/", requireBearer, (c) => deleteById(c, ""))
  .delete(ID, requireBearer, (c) => deleteById(c, c.req.param("id")));
