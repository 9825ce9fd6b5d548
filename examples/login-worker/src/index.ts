import { Hono } from "hono";
import { getCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import { validator } from "hono/validator";
// Type-only: the binding's methods and answers, checked at compile time, nothing bundled.
import type { AuthenticatedSession, SessionService } from "../../../src/rpc/session-service.ts";
import { companyOf, employers } from "./companies.ts";
import { devicesPage, mailboxPage, type Notice, reportPage, signInPage } from "./pages.ts";

// A minimal login worker showing how the rest of a product uses the session service: sign in
// a browser (create, cookie-only, + the ready cookie, offering device binding) or an API client
// (create, Bearer-only, the token in the JSON answer), protect a route (authenticate, given the
// request's cookies), and on a password change end every other session of the user
// (endUserSessions), let a support agent into a customer's account the customer can see
// (openSupportSession), and send a new device's "Was this you?" message, whose link ends that
// sign-in (the report token `create` answers with; /mailbox stands in for e-mail). The
// service's own routes (/auth/*, device binding included) are served on this origin through
// SESSION_API, as a route would in production: the session cookie is host-only, and the
// devices page lists and ends sessions by calling them from the browser. A business customer's
// employee (dana, at Globex) signs in to the customer's organization, whose rules the service
// applies to her sessions; her devices page states them.

interface Env {
  SESSIONS: Service<SessionService>;
  SESSION_API: Fetcher;
}

type AppEnv = { Bindings: Env; Variables: { session: AuthenticatedSession } };

const COOKIE = "__Host-session";

// Stand-in for a real user store with password hashes; enough to show the calls.
const passwords = new Map<string, string>([
  ["alice", "wonderland"],
  ["bob", "wonderland"],
  ["carol", "wonderland"],
  ["dana", "wonderland"],
]);
// Who may open support access: a real product asks its own roles.
const supportAgents = new Set(["carol"]);

// Stand-in for e-mail: the "new sign-in" messages this product sends, newest first, which the
// demo's /mailbox shows for every user (a real product mails each to its user).
const mailbox: Notice[] = [];

/**
 * A new device's sign-in: its "Was this you?" message. The link carries the report token in its
 * fragment, which the browser never sends to any server; the report page hands it to the API.
 */
function sendNewSignInNotice(request: Request, to: string, reportToken: string | undefined) {
  if (!reportToken) return;
  const link = `${new URL(request.url).origin}/report#${reportToken}`;
  mailbox.unshift({ to, at: new Date().toISOString(), ip: request.headers.get("CF-Connecting-IP"), link });
}

/** Cloudflare's view of the request: where the edge saw it come from (absent outside Cloudflare). */
type Edge = { country?: string; city?: string; asn?: number; latitude?: string; longitude?: string } | undefined;

/**
 * The signed-in session, or null (also when it is held after a use from another browser or OS:
 * the user signs in again). A device-bound session needs the request's cookies: all of them are
 * passed; and where the request comes from, judged against where the session was last used.
 */
async function sessionOf(
  c: { env: Env; req: { header(name: string): string | undefined; raw: Request } },
  token: string | undefined,
) {
  if (!token) return null;
  const cf = c.req.raw.cf as Edge;
  const context = {
    userAgent: c.req.header("User-Agent"),
    country: cf?.country,
    asn: cf?.asn,
    latitude: cf?.latitude,
    longitude: cf?.longitude,
  };
  const session = await c.env.SESSIONS.authenticate(token, {
    cookie: c.req.header("Cookie"),
    carrier: "cookie",
    context,
  });
  return session?.reauthenticationRequired ? null : session;
}

const requireSession = createMiddleware<AppEnv>(async (c, next) => {
  const session = await sessionOf(c, getCookie(c, COOKIE));
  if (!session) return c.json({ error: "sign in first" }, 401);
  c.set("session", session);
  await next();
});

/** What every sign-in tells the service of its request: who, at which customer, from where. */
function signIn(request: Request, userId: string) {
  const cf = request.cf as Edge;
  return {
    userId,
    // The organization of the company the user works at; none for the product's own users.
    organization: employers.get(userId)?.id ?? null,
    ipAddress: request.headers.get("CF-Connecting-IP"),
    userAgent: request.headers.get("User-Agent"),
    country: cf?.country,
    city: cf?.city,
    asn: cf?.asn,
    latitude: cf?.latitude,
    longitude: cf?.longitude,
    factors: ["pwd" as const],
  };
}

/** A JSON body with these string fields, or a 400 saying so (hono's validator: malformed JSON too). */
const jsonStrings = <K extends string>(...fields: K[]) =>
  validator("json", (value, c) =>
    fields.every((field) => typeof value[field] === "string")
      ? (value as Record<K, string>)
      : c.json({ error: `a JSON body with ${fields.join(" and ")} as strings` }, 400),
  );

const app = new Hono<AppEnv>()
  .all("/auth/*", (c) => c.env.SESSION_API.fetch(c.req.raw))
  .get("/", async (c) => {
    const session = await sessionOf(c, getCookie(c, COOKIE));
    if (!session) return c.html(signInPage([...passwords.keys()]));
    return c.html(devicesPage(session.userId, session.actor?.sub, companyOf(session.organization)));
  })
  // The browser's sign-in (the sign-in page posts here): its token lives only in the HttpOnly
  // cookie, so a copied cookie is worth nothing as Bearer, and its use is judged by its context.
  .post("/login", jsonStrings("user", "password"), async (c) => {
    const { user, password } = c.req.valid("json");
    if (passwords.get(user) !== password) return c.json({ error: "wrong user or password" }, 401);
    const session = await c.env.SESSIONS.create({
      ...signIn(c.req.raw, user),
      carrier: "cookie",
      // Offered to browsers (they send Fetch Metadata): those with DBSC bind the session to a key
      // they hold, the others ignore the header.
      deviceBound: c.req.header("Sec-Fetch-Site") !== undefined,
    });
    sendNewSignInNotice(c.req.raw, user, session.reportToken);
    c.header("Set-Cookie", session.cookie);
    if (session.secureSessionRegistration && session.boundCookie) {
      c.header("Set-Cookie", session.boundCookie, { append: true });
      c.header("Secure-Session-Registration", session.secureSessionRegistration);
    }
    return c.json({ signedIn: user, newDevice: session.newDevice });
  })
  // An API client's sign-in (a native app, a backend, a CLI): the token in the answer, sent as
  // Bearer from the client's own User-Agent; no cookie.
  .post("/api/login", jsonStrings("user", "password"), async (c) => {
    const { user, password } = c.req.valid("json");
    if (passwords.get(user) !== password) return c.json({ error: "wrong user or password" }, 401);
    const { token, expiresAt, newDevice, reportToken } = await c.env.SESSIONS.create({
      ...signIn(c.req.raw, user),
      carrier: "bearer",
    });
    sendNewSignInNotice(c.req.raw, user, reportToken);
    return c.json({ signedIn: user, token, expiresAt, newDevice });
  })
  .get("/mailbox", (c) => c.html(mailboxPage(mailbox)))
  // "Was this you?": the page reads the sign-in and ends it through the service's API, with the
  // report token from its own fragment; no session needed, the message is the proof.
  .get("/report", (c) => c.html(reportPage()))
  .get("/me", requireSession, (c) => {
    const { userId, sessionId, actor } = c.var.session;
    return c.json({ userId, sessionId, ...(actor ? { actor } : {}) });
  })
  // The support desk: a signed-in agent opens support access to a customer's account, with the
  // ticket as the reason, and gets its token (the support tool opens the product with it). The
  // customer sees it on their devices page. Support access itself opens none.
  .post("/support", requireSession, jsonStrings("user", "reason"), async (c) => {
    const { userId, actor } = c.var.session;
    if (actor || !supportAgents.has(userId)) return c.json({ error: "support agents only" }, 403);
    const { user, reason } = c.req.valid("json");
    try {
      const { token, expiresAt } = await c.env.SESSIONS.openSupportSession({
        userId: user,
        agentId: userId,
        reason,
        ipAddress: c.req.header("CF-Connecting-IP"),
        userAgent: c.req.header("User-Agent"),
      });
      return c.json({ supporting: user, token, expiresAt });
    } catch (error) {
      // The service's refusals (an unknown user, too many open, a bad reason) say what to fix;
      // anything else (a database briefly unavailable) is not the agent's to fix.
      if (!(error instanceof TypeError || error instanceof RangeError)) throw error;
      return c.json({ error: error.message }, 400);
    }
  })
  .post("/sign-out", async (c) => {
    // The service's own logout, with this request's cookies: it ends the session and clears them.
    const ended = await c.env.SESSION_API.fetch(new URL("/auth/logout", c.req.url), {
      method: "POST",
      headers: { Cookie: c.req.header("Cookie") ?? "", Origin: new URL(c.req.url).origin },
    });
    const response = c.redirect("/", 303);
    for (const cookie of ended.headers.getSetCookie()) response.headers.append("Set-Cookie", cookie);
    return response;
  })
  .post("/password", requireSession, jsonStrings("newPassword"), async (c) => {
    const { newPassword } = c.req.valid("json");
    const { userId, sessionId, actor } = c.var.session;
    // Only the user changes their password: support access sees the account, it does not take it.
    if (actor) return c.json({ error: "only the user can change the password" }, 403);
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
