import { Hono } from "hono";
import { requireBearerOrCookie } from "../middleware/auth.ts";
import { now } from "../clock.ts";
import type { AppEnv } from "../context.ts";
import { endAllSessions, endSession } from "../db/queries.ts";
import { ApiError, methodNotAllowed, unauthorized } from "../errors.ts";

// GET was withdrawn: a prefetch or an <img> could log a user out. It falls to the 405 below.
export const logoutRoutes = new Hono<AppEnv>()
  .post("/", requireBearerOrCookie, async (c) => {
    const { db, proof } = c.var;
    if (!(await endSession(db, proof, now()))) throw new ApiError(400, "session_invalid");
    return c.json({ message: "Logged out" });
  })
  .delete("/", requireBearerOrCookie, async (c) => {
    const { db, proof } = c.var;
    if ((await endAllSessions(db, proof, now())) === 0) throw unauthorized("session_invalid", true);
    return c.json({ message: "Logged out of all sessions" });
  })
  .all("/", () => {
    throw methodNotAllowed("POST, DELETE");
  });
