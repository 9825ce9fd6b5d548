import { Hono } from "hono";
import { getCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
// Type-only: the binding's methods and answers, checked at compile time, nothing bundled.
import type { AuthenticatedSession, SessionService } from "../../../src/session-service.ts";

// A minimal login worker showing how the rest of a product uses the session service: sign in
// (create + the ready cookie), protect a route (authenticate), and on a password change end
// every other session of the user (endUserSessions, keeping the current one).

interface Env {
  SESSIONS: Service<SessionService>;
}

const COOKIE = "__Host-session";

// Stand-in for a real user store with password hashes; enough to show the calls.
const passwords = new Map<string, string>([["alice", "wonderland"]]);

const requireSession = createMiddleware<{ Bindings: Env; Variables: { session: AuthenticatedSession } }>(
  async (c, next) => {
    const token = getCookie(c, COOKIE);
    const session = token ? await c.env.SESSIONS.authenticate(token) : null;
    if (!session) return c.json({ error: "sign in first" }, 401);
    c.set("session", session);
    await next();
  },
);

const app = new Hono<{ Bindings: Env }>()
  .post("/login", async (c) => {
    const { user, password } = await c.req.json<{ user: string; password: string }>();
    if (passwords.get(user) !== password) return c.json({ error: "wrong user or password" }, 401);
    const cf = c.req.raw.cf as { country?: string; city?: string } | undefined;
    const session = await c.env.SESSIONS.create({
      userId: user,
      ipAddress: c.req.header("CF-Connecting-IP"),
      userAgent: c.req.header("User-Agent"),
      country: cf?.country,
      city: cf?.city,
    });
    // A real product would send its "new sign-in" message here when session.newDevice is true.
    c.header("Set-Cookie", session.cookie);
    return c.json({ signedIn: user, newDevice: session.newDevice });
  })
  .get("/me", requireSession, (c) => c.json({ userId: c.var.session.userId, sessionId: c.var.session.sessionId }))
  .post("/password", requireSession, async (c) => {
    const { newPassword } = await c.req.json<{ newPassword: string }>();
    const { userId, sessionId } = c.var.session;
    passwords.set(userId, newPassword);
    // Everyone who knew the old password is signed out; this browser stays signed in.
    const { ended } = await c.env.SESSIONS.endUserSessions({
      userId,
      exceptSessionId: sessionId,
      reason: "password_changed",
    });
    return c.json({ passwordChanged: true, otherSessionsEnded: ended });
  });

export default app;
