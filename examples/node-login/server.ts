// A login flow that is not a Worker: a plain Node server (node:http, nothing else) that signs a
// browser in through the session service's admin API, protects a page with GET /auth/whoami, and
// signs the user out everywhere else when the password changes. It holds one admin key and never
// stores a session: the cookie the service makes goes to the browser, and every request is
// checked live, so a session ended anywhere is refused here on the next request.
//   SESSION_SERVICE_URL=http://localhost:8787 SESSION_ADMIN_KEY=ssak_… node examples/node-login/server.ts
// The key needs the scopes sessions:create (sign-in) and sessions:end (password change).
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";

const SERVICE = process.env.SESSION_SERVICE_URL ?? "http://localhost:8787";
const ADMIN_KEY = process.env.SESSION_ADMIN_KEY ?? "";
const PORT = Number(process.env.PORT ?? 3000);
if (!ADMIN_KEY.startsWith("ssak_")) {
  console.error("SESSION_ADMIN_KEY must be an admin key: npm run --silent admin:keys -- create --name node-login …");
  process.exit(1);
}

// Stand-in for a real user store, which keeps password hashes (scrypt, Argon2), never passwords.
const passwords = new Map([
  ["alice", "wonderland"],
  ["bob", "wonderland"],
]);

/** Ends a request early with a page saying why: a refusal, or the session service's failure. */
class Failure extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** What the session service answered: its status, JSON body (or null) and Set-Cookie values. */
interface Answer {
  status: number;
  json: { code?: string; [member: string]: unknown } | null;
  setCookies: string[];
}

/** One call to the session service. */
async function service(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const response = await fetch(new URL(path, SERVICE), {
    method,
    headers: body === undefined ? headers : { ...headers, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const json = response.headers.get("Content-Type")?.startsWith("application/json")
    ? ((await response.json()) as Answer["json"])
    : null;
  return { status: response.status, json, setCookies: response.headers.getSetCookie() };
}

/** A failure naming the call and the service's error code; it never carries a credential. */
function refusedBy(call: string, answer: Answer, said = call) {
  const message = `${said}: the session service answered ${answer.status} ${answer.json?.code ?? ""}`.trim();
  console.error(`${call} → ${answer.status} ${answer.json?.code ?? ""}`);
  return new Failure(502, message);
}

/** The admin API (JSON), with the key as Bearer: only this server ever holds it. */
const admin = (path: string, body: unknown, method = "POST") =>
  service(method, path, { Authorization: `Bearer ${ADMIN_KEY}` }, body);

/**
 * What the browser sent that its session is judged by, passed on as it came: its whole Cookie
 * header (the service finds `__Host-session` in it) and its User-Agent. Nothing else: the
 * service trusts this server's call no more than the browser itself.
 */
function asBrowser(request: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  if (request.headers.cookie) headers.Cookie = request.headers.cookie;
  if (request.headers["user-agent"]) headers["User-Agent"] = request.headers["user-agent"];
  return headers;
}

interface Whoami {
  session_id: string;
  user_id: string;
  authenticated_at: string;
  amr: string[];
  /** The application data this server keeps on the session (here: the workspace it shows). */
  data?: { workspace?: string };
  /** Only on support access: the agent acting in the user's account. */
  actor?: { sub: string; reason: string };
}

/** The browser's session, checked live, or null (no cookie, or the session ended, expired, or is held). */
async function whoami(request: IncomingMessage): Promise<Whoami | null> {
  if (!request.headers.cookie) return null;
  const answer = await service("GET", "/auth/whoami", asBrowser(request));
  if (answer.status === 401) return null;
  if (answer.status !== 200) throw refusedBy("GET /auth/whoami", answer);
  return answer.json as unknown as Whoami;
}

/**
 * A form posted by one of this site's own pages, and not by another site's (CSRF): the browser's
 * Fetch Metadata where it sends it, else its Origin, which every browser sends on a POST. Behind
 * a proxy that terminates TLS, compare with your public origin instead of the Host header.
 */
function fromThisSite(request: IncomingMessage): boolean {
  const site = request.headers["sec-fetch-site"];
  if (site !== undefined) return site === "same-origin";
  return request.headers.origin === `http://${request.headers.host}`;
}

/** The posted form's fields (application/x-www-form-urlencoded), at most 4 KiB. */
async function formOf(request: IncomingMessage): Promise<URLSearchParams> {
  let body = "";
  for await (const chunk of request) {
    body += chunk;
    if (body.length > 4096) throw new Failure(413, "That form is too large.");
  }
  return new URLSearchParams(body);
}

/** The client's address as this server sees it (behind a proxy: the address the proxy reports). */
function clientIp(request: IncomingMessage): string | null {
  return request.socket.remoteAddress?.replace(/^::ffff:/, "") ?? null;
}

// Pages ------------------------------------------------------------------------------------

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const page = (title: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem; }
input, button { font: inherit; padding: 0.3rem; margin: 0 0.4rem 0.5rem 0; } dt { font-weight: bold; }
#notice { background: #eef3fb; padding: 0.5rem; }</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;

const notice = (text?: string) => (text ? `<p id="notice">${escapeHtml(text)}</p>` : "");

function signInPage(message?: string) {
  return page(
    "Sign in",
    `${notice(message)}<p>Demo users: ${[...passwords.keys()].join(", ")} (password: wonderland).</p>
<form method="post" action="/login">
  <input name="username" placeholder="username" autocomplete="username" required>
  <input name="password" type="password" placeholder="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>`,
  );
}

function homePage(me: Whoami, message?: string) {
  const row = (name: string, value: string) => `<dt>${name}</dt><dd id="${name}">${escapeHtml(value)}</dd>`;
  return page(
    `Hello, ${me.user_id}`,
    `${notice(message)}<p>Who this browser is, as GET /auth/whoami answered for this request:</p>
<dl>${row("user_id", me.user_id)}${row("session_id", me.session_id)}${row("authenticated_at", me.authenticated_at)}${row("amr", me.amr.join(", "))}${row("workspace", me.data?.workspace ?? "")}</dl>
<h2>Workspace</h2>
<p>Kept on this session as application data: other devices keep their own.</p>
<form method="post" action="/workspace">
  <input name="workspace" placeholder="workspace" maxlength="40" required>
  <button type="submit">Switch</button>
</form>
<h2>Change password</h2>
<p>Signs you out on every other device; this browser stays signed in.</p>
<form method="post" action="/password">
  <input name="current" type="password" placeholder="current password" autocomplete="current-password" required>
  <input name="new" type="password" placeholder="new password" autocomplete="new-password" minlength="8" required>
  <button type="submit">Change password</button>
</form>
<form method="post" action="/logout"><button type="submit">Sign out</button></form>`,
  );
}

function send(response: ServerResponse, status: number, html: string) {
  response.writeHead(status, {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "Content-Security-Policy":
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
  });
  response.end(html);
}

function redirect(response: ServerResponse, location: string, cookies: string[] = []) {
  response.writeHead(303, { Location: location, "Cache-Control": "no-store", "Set-Cookie": cookies });
  response.end();
}

// Routes -----------------------------------------------------------------------------------

async function signIn(request: IncomingMessage, response: ServerResponse) {
  const form = await formOf(request);
  const userId = form.get("username") ?? "";
  if (!passwords.has(userId) || passwords.get(userId) !== form.get("password"))
    return send(response, 401, signInPage("Wrong username or password."));
  const answer = await admin("/admin/sessions", {
    userId,
    ipAddress: clientIp(request),
    userAgent: request.headers["user-agent"] ?? null,
    // The token lives only in the cookie: sent as Bearer, it is refused.
    carrier: "cookie",
    factors: ["pwd"],
    // Application data on the session: the workspace this browser works in, read back by whoami.
    data: { workspace: "personal" },
  });
  if (answer.status !== 201) throw refusedBy("POST /admin/sessions", answer, "Could not sign you in");
  const { cookie } = answer.json as { cookie: string; newDevice: boolean };
  // A real product sends its "new sign-in" e-mail here when newDevice is true.
  redirect(response, "/", [cookie]);
}

async function home(request: IncomingMessage, response: ServerResponse) {
  const me = await whoami(request);
  if (!me) return redirect(response, "/login");
  send(response, 200, homePage(me));
}

async function changePassword(request: IncomingMessage, response: ServerResponse) {
  const form = await formOf(request);
  const me = await whoami(request);
  if (!me) return redirect(response, "/login");
  // Support access sees the account; it does not take it.
  if (me.actor) return send(response, 403, homePage(me, "Only the user can change the password."));
  if (passwords.get(me.user_id) !== form.get("current"))
    return send(response, 403, homePage(me, "The current password is wrong."));
  const next = form.get("new") ?? "";
  if (next.length < 8) return send(response, 400, homePage(me, "The new password needs 8 characters or more."));
  passwords.set(me.user_id, next);
  // Whoever knew the old password is signed out everywhere, but for this browser.
  const answer = await admin(`/admin/users/${encodeURIComponent(me.user_id)}/sessions/end`, {
    reason: "password_changed",
    exceptSessionId: me.session_id,
  });
  if (answer.status !== 200)
    throw refusedBy(
      "POST /admin/users/:userId/sessions/end",
      answer,
      "Your password changed, but your other sessions were NOT signed out",
    );
  const { ended } = answer.json as { ended: number };
  send(response, 200, homePage(me, `Password changed. Signed out ${ended} other session${ended === 1 ? "" : "s"}.`));
}

async function switchWorkspace(request: IncomingMessage, response: ServerResponse) {
  const form = await formOf(request);
  const me = await whoami(request);
  if (!me) return redirect(response, "/login");
  const workspace = (form.get("workspace") ?? "").trim();
  if (workspace === "" || workspace.length > 40)
    return send(response, 400, homePage(me, "A workspace name has 1 to 40 characters."));
  // A merge patch: only this key of the session's data changes.
  const answer = await admin(`/admin/sessions/${me.session_id}/data`, { workspace }, "PATCH");
  if (answer.status !== 200) throw refusedBy("PATCH /admin/sessions/:sessionId/data", answer);
  redirect(response, "/");
}

async function signOut(request: IncomingMessage, response: ServerResponse) {
  // The service's own logout, with the browser's cookie: it ends the session and answers the
  // Set-Cookie that clears it, passed on here. A session that had ended already is 400
  // session_invalid (the cookie cleared all the same), no cookie at all 401 token_required.
  const answer = await service("POST", "/auth/logout", asBrowser(request));
  const gone =
    answer.status === 200 || answer.json?.code === "session_invalid" || answer.json?.code === "token_required";
  if (!gone) throw refusedBy("POST /auth/logout", answer);
  redirect(response, "/login", answer.setCookies);
}

async function route(request: IncomingMessage, response: ServerResponse) {
  const { pathname } = new URL(request.url ?? "/", "http://localhost");
  if (request.method === "POST" && !fromThisSite(request))
    return send(response, 403, page("Refused", "<p>That form was posted from another site.</p>"));
  switch (`${request.method} ${pathname}`) {
    case "GET /login":
      return send(response, 200, signInPage());
    case "POST /login":
      return signIn(request, response);
    case "GET /":
      return home(request, response);
    case "POST /password":
      return changePassword(request, response);
    case "POST /workspace":
      return switchWorkspace(request, response);
    case "POST /logout":
      return signOut(request, response);
    default:
      return send(response, 404, page("Not found", '<p><a href="/">Home</a></p>'));
  }
}

createServer((request, response) => {
  route(request, response).catch((error: unknown) => {
    const failure = error instanceof Failure ? error : new Failure(500, "Something went wrong.");
    if (failure !== error) console.error(error instanceof Error ? error.message : "failed");
    if (!response.headersSent) send(response, failure.status, page("Sorry", `<p>${escapeHtml(failure.message)}</p>`));
    else response.end();
  });
}).listen(PORT, "127.0.0.1", () => {
  console.log(`node-login: http://localhost:${PORT} (session service ${SERVICE})`);
});
