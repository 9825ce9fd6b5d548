import {
  authenticateToken,
  endAllOwnSessions,
  endOtherOwnSessions,
  endOwnSession,
} from "../../services/own-sessions.ts";
import type { AppEnv } from "../context.ts";
import { clearCarriedCookie } from "../cookie.ts";
import { ApiError, reauthenticationRequired, sessionInvalid, supportRefused, unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import { requireBearerOrCookie } from "../middleware/auth.ts";

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

// GET was withdrawn: a prefetch or an <img> could log a user out. It gets the app's 405.
export const logoutRoutes = new Hono<AppEnv>()
  .post("/", requireBearerOrCookie, async (c) => {
    const ended = await endOwnSession(c.var.scope, c.var.token);
    clearCarriedCookie(c);
    if (!ended) throw sessionInvalid();
    return c.json({ message: "Logged out" });
  })
  .delete("/", requireBearerOrCookie, async (c) => {
    const { scope, token } = c.var;
    const scopeParameter = c.req.query("scope");
    if (scopeParameter !== undefined && scopeParameter !== "others") {
      // An addition may not change a specified answer: a dead token is still the contract's
      // 401 session_invalid, so the token is proven first (the one round trip); nothing ends.
      const caller = await authenticateToken(scope, token);
      if (caller?.contextStepUp) throw reauthenticationRequired(scope.config.stepUpMaxAgeSeconds);
      clearCarriedCookie(c);
      if (!caller) throw unauthorized("session_invalid", true);
      throw new ApiError(400, "invalid_scope");
    }
    if (scopeParameter === "others") {
      const ended = await endOtherOwnSessions(scope, token);
      // The caller stays signed in, so its cookie stays, unless its own token was dead.
      if (ended === "invalid_token") {
        clearCarriedCookie(c);
        throw unauthorized("session_invalid", true);
      }
      if (ended === "step_up") throw reauthenticationRequired(scope.config.stepUpMaxAgeSeconds);
      if (ended === "support") throw supportRefused();
      return c.json({ message: `Logged out of ${plural(ended, "other session")}` });
    }
    const ended = await endAllOwnSessions(scope, token);
    if (ended === "step_up") throw reauthenticationRequired(scope.config.stepUpMaxAgeSeconds);
    // Nothing ended, the caller stays signed in: its cookie stays.
    if (ended === "support") throw supportRefused();
    clearCarriedCookie(c);
    if (ended === "invalid_token") throw unauthorized("session_invalid", true);
    return c.json({ message: "Logged out of all sessions" });
  });
