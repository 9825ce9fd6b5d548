import { isRefusal } from "../../domain/refusal.ts";
import { endAllOwnSessions, endOtherOwnSessions, endOwnSession, ownSession } from "../../services/own-sessions.ts";
import { clearCarriedCookie } from "../cookie.ts";
import { Hono } from "../hono.ts";
import { requireBearerOrCookie } from "../middleware/auth.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { invalidScope, refused } from "../refusals.ts";

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

// GET was withdrawn: a prefetch or an <img> could log a user out. It gets the app's 405.
// A logout clears a cookie the request carried whenever the token is dead, and only then.
export const logoutRoutes = new Hono<ScopedEnv>()
  .post("/", requireBearerOrCookie, async (c) => {
    const ended = await endOwnSession(c.var.scope, c.var.token);
    clearCarriedCookie(c);
    if (ended === "not_live") throw refused(c, ended, "session_invalid_400");
    return c.json({ message: "Logged out" });
  })
  .delete("/", requireBearerOrCookie, async (c) => {
    const { scope, token } = c.var;
    const scopeParameter = c.req.query("scope");
    if (scopeParameter !== undefined && scopeParameter !== "others") {
      // An addition may not change a specified answer: a dead token is still the contract's
      // 401 session_invalid, so the token is proven first (the one round trip); nothing ends.
      const state = await ownSession(scope, token);
      if (state === "step-up") throw refused(c, state);
      clearCarriedCookie(c);
      if (state === "not_live") throw refused(c, state, "session_invalid");
      throw invalidScope();
    }
    const ended =
      scopeParameter === "others" ? await endOtherOwnSessions(scope, token) : await endAllOwnSessions(scope, token);
    if (ended === "not_live") clearCarriedCookie(c);
    // The caller stays signed in otherwise (a refusal, or the other sessions ended): its cookie stays.
    if (isRefusal(ended)) throw refused(c, ended, "session_invalid");
    if (scopeParameter === "others") return c.json({ message: `Logged out of ${plural(ended, "other session")}` });
    clearCarriedCookie(c);
    return c.json({ message: "Logged out of all sessions" });
  });
