import { isStale } from "../../db/liveness.ts";
import { authenticate, endAllSessionsByToken, endOtherSessionsByToken, endSessionByToken } from "../../db/sessions.ts";
import { published } from "../../services/outbox.ts";
import type { AppEnv } from "../context.ts";
import { clearCarriedCookie } from "../cookie.ts";
import { ApiError, reauthenticationRequired, sessionInvalid, unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import { actorOf, requireBearerOrCookie } from "../middleware/auth.ts";

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

// GET was withdrawn: a prefetch or an <img> could log a user out. It gets the app's 405.
export const logoutRoutes = new Hono<AppEnv>()
  .post("/", requireBearerOrCookie, async (c) => {
    const { place, proof, at } = c.var;
    const ended = published(c.var.outbox, await endSessionByToken(place, proof, actorOf(c), at));
    clearCarriedCookie(c);
    if (!ended) throw sessionInvalid();
    return c.json({ message: "Logged out" });
  })
  .delete("/", requireBearerOrCookie, async (c) => {
    const { place, proof, at } = c.var;
    const scope = c.req.query("scope");
    if (scope !== undefined && scope !== "others") {
      // An addition may not change a specified answer: a dead token is still the contract's
      // 401 session_invalid, so the token is proven first (the one round trip); nothing ends.
      const caller = await authenticate(place, proof, at);
      clearCarriedCookie(c);
      if (!caller) throw unauthorized("session_invalid", true);
      throw new ApiError(400, "invalid_scope");
    }
    if (scope === "others") {
      // The caller stays signed in, so its cookie stays, unless its own token was dead.
      const { proven, ended, caller } = published(
        c.var.outbox,
        await endOtherSessionsByToken(place, proof, actorOf(c), at),
      );
      if (!proven) {
        clearCarriedCookie(c);
        throw unauthorized("session_invalid", true);
      }
      if (isStale(caller, at)) throw reauthenticationRequired(c.var.config.stepUpMaxAgeSeconds);
      return c.json({ message: `Logged out of ${plural(ended, "other session")}` });
    }
    const ended = published(c.var.outbox, await endAllSessionsByToken(place, proof, actorOf(c), at));
    clearCarriedCookie(c);
    if (ended === 0) throw unauthorized("session_invalid", true);
    return c.json({ message: "Logged out of all sessions" });
  });
