// Real-browser CSRF test of the logouts: `npm run test:browser` (or `node scripts/browser-test.ts`).
//
// Starts `npm start` (wrangler dev, local D1) on a free loopback port in its own process
// group, issues sessions with `npm run session:create`, gives Chromium the session as the
// `__Host-session` cookie of the API origin http://localhost:<port>, then has it visit
// attacker pages served from two other loopback origins:
//   - cross-SITE   http://127.0.0.1:<p>  (another site: SameSite=Lax keeps the cookie off
//                                         subresources and POSTs, and Sec-Fetch-Site says
//                                         `cross-site`)
//   - same-SITE    http://localhost:<q>  (same site, other origin: the Lax cookie IS sent,
//                                         so only the service's Origin check stands between
//                                         the page and a logout)
// Each page tries the ways a page can reach /auth/logout without the user: <img>,
// <link rel=prefetch>, <iframe>, an auto-submitted POST form, no-cors POST and HEAD
// fetches, sendBeacon, a no-cors and a CORS DELETE, and (second visit) a script-driven
// top-level GET navigation. Afterwards the session must still authenticate (Bearer, from
// Node) and the browser must still hold the cookie. Then, on the API origin itself: a
// top-level GET /auth/logout (405, nothing changes) and a genuine same-origin
// `fetch('/auth/logout', {method: 'POST'})` (200, session over, cookie cleared).
//
// Every request the browser makes to the API is recorded (status, whether it carried the
// cookie, Sec-Fetch-Site, Origin) and printed as `info:` lines; statuses are asserted where
// they are deterministic. Chromium is Debian's /usr/bin/chromium (CHROMIUM_PATH overrides;
// never downloaded); all traffic stays on loopback. Prints one line per check and
// `N passed, M failed`; exits 1 on any failure. Everything started here is stopped by
// process id (group) on the way out, failures and signals included.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { type Browser, type BrowserContext, chromium, type Page, type Request, type Response } from "playwright-core";
import { sessionCookie } from "../src/cookie.ts";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--no-sandbox", // CI runs as root
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  // Without these Chromium keeps calling home, which a closed network turns into a flood.
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const COOKIE = "__Host-session";
const RUN_DEADLINE_MS = 100_000;
const SERVER_START_MS = 60_000;
const SESSION_CREATE_MS = 30_000;
const PAGE_MS = 15_000;
const HTTP_MS = 5_000;

// ---------------------------------------------------------------------------------------
// Checks and output

let passed = 0;
let failed = 0;

function check(name: string, ok: boolean, detail = ""): boolean {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? "ok  " : "FAIL"}  ${name}${detail ? `  (${detail})` : ""}`);
  return ok;
}

function info(line: string): void {
  console.log(`      info: ${line}`);
}

function message(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? String(error)) : String(error);
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------
// Processes: each child leads its own process group, stopped by that id (never by name).

const groups = new Set<number>();

function spawnGroup(command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, { detached: true, stdio: ["ignore", "pipe", "pipe"] });
  if (child.pid === undefined) throw new Error(`could not start ${command} ${args.join(" ")}`);
  groups.add(child.pid);
  return child;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stopGroup(pgid: number): Promise<void> {
  if (!groups.has(pgid)) return;
  try {
    process.kill(-pgid, "SIGTERM");
  } catch {
    // already gone
  }
  const deadline = Date.now() + 5_000;
  while (groupAlive(pgid) && Date.now() < deadline) await sleep(100);
  if (groupAlive(pgid)) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // gone in between
    }
  }
  groups.delete(pgid);
}

// Last resort (an exception past every finally, process.exit from the watchdog).
process.on("exit", () => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // gone
    }
  }
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function startApi(port: number): Promise<{ child: ChildProcess; log: () => string }> {
  const child = spawnGroup("npm", ["start", "--", "--ip", "127.0.0.1", "--port", String(port)]);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let exited = false;
  child.once("exit", () => (exited = true));
  const deadline = Date.now() + SERVER_START_MS;
  while (Date.now() < deadline && !exited) {
    try {
      await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1_000) });
      return { child, log: () => output };
    } catch {
      await sleep(250);
    }
  }
  throw new Error(`npm start did not answer on port ${port}${exited ? " (it exited)" : ""}:\n${output.slice(-3_000)}`);
}

interface IssuedSession {
  id: string;
  token: string;
  expiresAt: string;
}

async function createSession(user: string): Promise<IssuedSession> {
  const child = spawnGroup("npm", ["run", "--silent", "session:create", "--", "--user", user]);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const pgid = child.pid as number;
  try {
    const [code, signal] = (await withTimeout(once(child, "exit"), SESSION_CREATE_MS, "session:create")) as [
      number | null,
      string | null,
    ];
    if (code !== 0) throw new Error(`session:create exited with ${code ?? signal}: ${stderr.slice(-1_000)}`);
  } finally {
    await stopGroup(pgid); // its workerd, should it outlive npm
  }
  const line = stdout.trim().split("\n").at(-1) ?? "";
  const session = JSON.parse(line) as IssuedSession;
  if (!session.id || !session.token) throw new Error(`session:create printed ${line}`);
  return session;
}

// ---------------------------------------------------------------------------------------
// The attacker: one tiny http server per origin, serving the same page.

function attackerPage(api: string): string {
  const target = `${api}/auth/logout`;
  // `?via=` only tags each request for the log: routes match the path, tokens in the query
  // string are ignored, so the service sees exactly `/auth/logout`.
  return `<!doctype html>
<meta charset="utf-8">
<title>Totally harmless page</title>
<img src="${target}?via=img" alt="">
<link rel="prefetch" href="${target}?via=prefetch">
<iframe src="${target}?via=iframe"></iframe>
<form id="csrf" method="POST" action="${target}?via=form"><input type="hidden" name="x" value="1"></form>
<script>
const API = ${JSON.stringify(api)};
const results = {};
async function attempt(name, run) {
  try { results[name] = await run(); } catch (error) { results[name] = "threw " + error.name + ": " + error.message; }
}
// After load: the <img> and <iframe> have answered, and the form navigates away last.
addEventListener("load", async () => {
  await attempt("fetch-post-no-cors", async () => {
    const r = await fetch(API + "/auth/logout?via=fetch-post", { method: "POST", mode: "no-cors", credentials: "include", signal: AbortSignal.timeout(5000) });
    return "resolved type=" + r.type + " status=" + r.status;
  });
  await attempt("fetch-head-no-cors", async () => {
    const r = await fetch(API + "/auth/logout?via=fetch-head", { method: "HEAD", mode: "no-cors", credentials: "include", signal: AbortSignal.timeout(5000) });
    return "resolved type=" + r.type + " status=" + r.status;
  });
  // A beacon is a credentialed POST that outlives the page: the classic fire-and-forget CSRF.
  await attempt("beacon", async () => "queued=" + navigator.sendBeacon(API + "/auth/logout?via=beacon"));
  await attempt("fetch-delete-no-cors", async () => {
    const r = await fetch(API + "/auth/logout?via=fetch-delete-no-cors", { method: "DELETE", mode: "no-cors", credentials: "include", signal: AbortSignal.timeout(5000) });
    return "resolved type=" + r.type + " status=" + r.status;
  });
  await attempt("fetch-delete-cors", async () => {
    const r = await fetch(API + "/auth/logout?via=fetch-delete-cors", { method: "DELETE", mode: "cors", credentials: "include", signal: AbortSignal.timeout(5000) });
    return "resolved type=" + r.type + " status=" + r.status;
  });
  console.log("attacker-results " + JSON.stringify(results));
  document.getElementById("csrf").submit();
});
</script>`;
}

// A script-driven top-level GET: the one cross-site request SameSite=Lax lets the cookie ride on.
function navigatingPage(api: string): string {
  return `<!doctype html><title>Redirecting</title><script>location.replace(${JSON.stringify(`${api}/auth/logout?via=top-level-get`)});</script>`;
}

async function startAttacker(host: string, api: string): Promise<{ server: Server; origin: string }> {
  const pages: Record<string, string> = { "/": attackerPage(api), "/navigate": navigatingPage(api) };
  const server = createServer((req, res) => {
    const body = pages[req.url ?? ""];
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" }).end(body);
  });
  server.listen(0, "127.0.0.1");
  await withTimeout(once(server, "listening"), HTTP_MS, "attacker server listen");
  const { port } = server.address() as AddressInfo;
  return { server, origin: `http://${host}:${port}` };
}

function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

// ---------------------------------------------------------------------------------------
// What the browser sent to the API and what came back.

interface Observed {
  via: string;
  method: string;
  type: string;
  status: number | null;
  failure: string | null;
  /** null: the wire headers were not observable. */
  cookie: boolean | null;
  /** Why Chromium left the session cookie off, when it says so (e.g. SameSiteLax). */
  cookieBlocked: string;
  secFetchSite: string;
  origin: string;
  setCookie: string;
  done: boolean;
}

function blank(url: string, method: string, type: string): Observed {
  const parsed = new URL(url);
  return {
    via: parsed.searchParams.get("via") ?? parsed.pathname,
    method,
    type,
    status: null,
    failure: null,
    cookie: null,
    cookieBlocked: "",
    secFetchSite: "-",
    origin: "-",
    setCookie: "",
    done: false,
  };
}

function header(headers: Record<string, unknown>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return String(value);
  return undefined;
}

/**
 * Records every request the browser makes to the API, from two vantage points:
 * - Playwright's context events, which see every frame (an out-of-process iframe included)
 *   but know nothing of a request whose response Chromium blocked: the service's
 *   `Cross-Origin-Resource-Policy: same-origin` makes every cross-origin <img>, prefetch
 *   and no-cors fetch a `net::ERR_BLOCKED_BY_RESPONSE`, with no status and no wire headers;
 * - a CDP session on each page, whose ExtraInfo events carry the headers and cookies as
 *   sent (and why a cookie was left off) and the status even of a blocked response.
 */
class Recorder {
  private readonly playwright: Observed[] = [];
  private readonly cdp = new Map<string, Observed & { url: string }>();
  private readonly pending: Promise<unknown>[] = [];
  private readonly api: string;
  private readonly token: string;

  constructor(context: BrowserContext, api: string, token: string) {
    this.api = api;
    this.token = token;
    const byRequest = new Map<Request, Observed>();
    context.on("request", (request) => {
      if (!this.ours(request.url())) return;
      const entry = blank(request.url(), request.method(), request.resourceType());
      byRequest.set(request, entry);
      this.playwright.push(entry);
      this.pending.push(this.readHeaders(request, entry));
    });
    context.on("response", (response: Response) => {
      const entry = byRequest.get(response.request());
      if (!entry) return;
      entry.status = response.status();
      this.pending.push(
        withTimeout(response.allHeaders(), HTTP_MS, "response headers")
          .then((headers) => (entry.setCookie = headers["set-cookie"] ?? ""))
          .catch(() => {}),
      );
    });
    context.on("requestfinished", (request) => {
      const entry = byRequest.get(request);
      if (entry) entry.done = true;
    });
    context.on("requestfailed", (request) => {
      const entry = byRequest.get(request);
      if (!entry) return;
      entry.failure = request.failure()?.errorText ?? "failed";
      entry.done = true;
    });
  }

  private ours(url: string): boolean {
    return url.startsWith(`${this.api}/auth/`);
  }

  private carried(cookieHeader: string | undefined): boolean {
    return (cookieHeader ?? "").split(/;\s*/).includes(`${COOKIE}=${this.token}`);
  }

  private async readHeaders(request: Request, entry: Observed): Promise<void> {
    // allHeaders() is what went on the wire only once Chromium reports a response.
    try {
      const headers = await withTimeout(request.allHeaders(), 3_000, "request headers");
      if (headers["sec-fetch-site"] === undefined) return; // provisional headers only
      entry.cookie = this.carried(headers.cookie);
      entry.secFetchSite = headers["sec-fetch-site"];
      entry.origin = headers.origin ?? "-";
    } catch {
      // not observable here
    }
  }

  /** Adds the CDP view of `page`; call before it navigates. */
  async attach(page: Page): Promise<void> {
    const session = await page.context().newCDPSession(page);
    const entry = (requestId: string) => {
      let found = this.cdp.get(requestId);
      if (!found) {
        found = { ...blank(`${this.api}/`, "?", "?"), url: "" };
        this.cdp.set(requestId, found);
      }
      return found;
    };
    session.on("Network.requestWillBeSent", (event) => {
      const found = entry(event.requestId);
      const fresh = blank(event.request.url, event.request.method, (event.type ?? "other").toLowerCase());
      Object.assign(found, { url: event.request.url, via: fresh.via, method: fresh.method, type: fresh.type });
    });
    session.on("Network.requestWillBeSentExtraInfo", (event) => {
      const found = entry(event.requestId);
      found.cookie = this.carried(header(event.headers, "cookie"));
      found.cookieBlocked = event.associatedCookies
        .filter((c) => c.cookie.name === COOKIE && c.blockedReasons.length > 0)
        .map((c) => c.blockedReasons.join("+"))
        .join(",");
      found.secFetchSite = header(event.headers, "sec-fetch-site") ?? "-";
      found.origin = header(event.headers, "origin") ?? "-";
    });
    session.on("Network.responseReceivedExtraInfo", (event) => {
      const found = entry(event.requestId);
      found.status = event.statusCode;
      found.setCookie = header(event.headers, "set-cookie") ?? "";
    });
    session.on("Network.responseReceived", (event) => {
      const found = entry(event.requestId);
      found.status ??= event.response.status;
    });
    session.on("Network.loadingFinished", (event) => {
      entry(event.requestId).done = true;
    });
    session.on("Network.loadingFailed", (event) => {
      const found = entry(event.requestId);
      const reasons = [event.blockedReason, event.corsErrorStatus?.corsError].filter(Boolean);
      found.failure = `${event.errorText}${reasons.length ? ` [${reasons.join(", ")}]` : ""}`;
      found.done = true;
    });
    await session.send("Network.enable");
  }

  /** Both views merged: CDP's wire facts win, Playwright fills in what CDP did not see. */
  observed(): Observed[] {
    const fromCdp = [...this.cdp.values()].filter((e) => this.ours(e.url));
    const used = new Set<Observed>();
    const merged: Observed[] = [];
    for (const pw of this.playwright) {
      const twin = fromCdp.find((e) => !used.has(e) && e.via === pw.via && e.method === pw.method);
      if (!twin) {
        merged.push(pw);
        continue;
      }
      used.add(twin);
      merged.push({
        ...pw,
        status: twin.status ?? pw.status,
        failure: twin.failure ?? pw.failure,
        cookie: twin.cookie ?? pw.cookie,
        cookieBlocked: twin.cookieBlocked,
        secFetchSite: twin.secFetchSite !== "-" ? twin.secFetchSite : pw.secFetchSite,
        origin: twin.origin !== "-" ? twin.origin : pw.origin,
        setCookie: twin.setCookie || pw.setCookie,
        done: twin.done || pw.done,
      });
    }
    for (const e of fromCdp) if (!used.has(e)) merged.push(e);
    return merged;
  }

  /** Waits (bounded) until every recorded request has finished or failed. */
  async settle(ms = 5_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline && this.observed().some((e) => !e.done)) await sleep(50);
    await withTimeout(Promise.allSettled(this.pending), ms, "header reads").catch(() => {});
    for (const e of this.observed()) if (!e.done) info(`still unfinished after ${ms} ms: ${e.method} ${e.via}`);
  }

  find(via: string, method?: string): Observed[] {
    return this.observed().filter((e) => e.via === via && (method === undefined || e.method === method));
  }

  print(): void {
    for (const e of this.observed()) {
      const cookie =
        e.cookie === null
          ? "cookie ?"
          : e.cookie
            ? "cookie SENT"
            : `cookie not sent${e.cookieBlocked ? ` (blocked: ${e.cookieBlocked})` : ""}`;
      info(
        `${e.method} ${e.via} [${e.type}] -> ${e.status ?? "no status"}${e.failure ? `, then ${e.failure}` : ""}; ${cookie}; ` +
          `Sec-Fetch-Site ${e.secFetchSite}; Origin ${e.origin}${e.setCookie ? `; Set-Cookie ${e.setCookie}` : ""}`,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------
// The API, seen from Node (Bearer) and from the browser's cookie jar.

async function bearerStatus(apiDirect: string, token: string): Promise<number> {
  const response = await fetch(`${apiDirect}/auth/sessions`, {
    headers: { Authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(HTTP_MS),
  });
  await response.arrayBuffer();
  return response.status;
}

async function jarCookie(context: BrowserContext, api: string) {
  return (await context.cookies(api)).find((cookie) => cookie.name === COOKIE);
}

/**
 * Hands the browser the session the way the login worker would: a `Set-Cookie` from the API
 * origin carrying exactly what `sessionCookie()` (src/cookie.ts) builds. The response is
 * fulfilled by Playwright on a throwaway page (no login route exists over HTTP), but the
 * cookie goes through Chromium's own Set-Cookie parsing for http://localhost:<port>.
 *
 * Chromium counts http://localhost as a secure context, so it accepts `Secure` and the
 * `__Host-` prefix over plain http there and sends the cookie back (checked below and by
 * the first navigation). `context.addCookies({ url })` cannot do it: Playwright derives
 * `secure: false` from an http URL and Chromium then refuses the `__Host-` cookie
 * ("Invalid cookie fields"); `addCookies({ domain: "localhost", path: "/", secure: true })`
 * would work too, but would not exercise the header the service actually sends.
 */
async function giveCookie(context: BrowserContext, api: string, session: IssuedSession): Promise<void> {
  const maxAge = Math.max(60, Math.floor((Date.parse(session.expiresAt) - Date.now()) / 1000));
  const page = await context.newPage();
  try {
    await page.route(`${api}/__browser-test/login`, (route) =>
      route.fulfill({
        status: 204,
        headers: { "Set-Cookie": sessionCookie(COOKIE, session.token, maxAge), "Cache-Control": "no-store" },
      }),
    );
    // A 204 is not a document: navigate to a page that fetches it instead.
    await page.route(`${api}/__browser-test/blank`, (route) =>
      route.fulfill({ status: 200, contentType: "text/html", body: "<!doctype html><title>login</title>" }),
    );
    await page.goto(`${api}/__browser-test/blank`, { timeout: PAGE_MS });
    await page.evaluate("fetch('/__browser-test/login').then((r) => r.status)");
  } finally {
    await page.close(); // its routes (request interception) go with it
  }
}

// ---------------------------------------------------------------------------------------
// Scenarios

function describe(e: Observed | undefined): string {
  if (!e) return "not seen";
  const cookie = e.cookie === null ? "cookie ?" : e.cookie ? "cookie sent" : "cookie not sent";
  return `${e.method} -> ${e.status ?? "no status"}${e.failure ? ` (${e.failure})` : ""}, ${cookie}, Sec-Fetch-Site ${e.secFetchSite}, Origin ${e.origin}`;
}

async function attackerScenario(
  browser: Browser,
  label: string,
  attacker: string,
  api: string,
  apiDirect: string,
  session: IssuedSession,
  sameSite: boolean,
): Promise<void> {
  const context = await browser.newContext();
  try {
    const recorder = new Recorder(context, api, session.token);
    await giveCookie(context, api, session);
    const held = await jarCookie(context, api);
    check(
      `${label}: browser holds ${COOKIE} for ${api} before the visit`,
      held?.value === session.token &&
        held.secure &&
        held.httpOnly &&
        held.sameSite === "Lax" &&
        held.domain === "localhost" &&
        held.path === "/",
      held
        ? `domain=${held.domain} path=${held.path} secure=${held.secure} httpOnly=${held.httpOnly} sameSite=${held.sameSite}`
        : "absent",
    );

    const page = await context.newPage();
    await recorder.attach(page);
    let results = "";
    page.on("console", (msg) => {
      if (msg.text().startsWith("attacker-results ")) results = msg.text().slice("attacker-results ".length);
    });
    const formResponse = page.waitForResponse((r) => r.url().includes("via=form"), { timeout: PAGE_MS });
    formResponse.catch(() => {});
    await page.goto(`${attacker}/`, { timeout: PAGE_MS });
    let formStatus: number | null = null;
    let formCode = "";
    try {
      const response = await formResponse;
      formStatus = response.status();
      await page.waitForLoadState("load", { timeout: PAGE_MS });
      formCode = ((await withTimeout(response.json(), HTTP_MS, "form body")) as { code?: string }).code ?? "";
    } catch (error) {
      info(`form submission: ${message(error)}`);
    }
    // Second visit: the attacker's script navigates the whole tab to GET /auth/logout.
    let topLevel: number | null = null;
    try {
      const navigated = page.waitForResponse((r) => r.url().includes("via=top-level-get"), { timeout: PAGE_MS });
      navigated.catch(() => {});
      await page.goto(`${attacker}/navigate`, { timeout: PAGE_MS });
      topLevel = (await navigated).status();
      await page.waitForLoadState("load", { timeout: PAGE_MS });
    } catch (error) {
      info(`top-level navigation: ${message(error)}`);
    }
    await recorder.settle();
    recorder.print();
    info(`in-page fetch results: ${results || "(none reported)"}`);
    await page.close();
    const parsed = results ? (JSON.parse(results) as Record<string, string>) : {};

    const status = await bearerStatus(apiDirect, session.token);
    check(
      `${label}: session still authenticates after the visit (Bearer GET /auth/sessions)`,
      status === 200,
      `status ${status}`,
    );
    const after = await jarCookie(context, api);
    check(`${label}: browser still holds ${COOKIE}`, after?.value === session.token, after ? "held" : "gone");

    const one = (via: string, method: string) => recorder.find(via, method)[0];
    const img = one("img", "GET");
    const iframe = one("iframe", "GET");
    const form = one("form", "POST");
    const fetchPost = one("fetch-post", "POST");
    const fetchHead = one("fetch-head", "HEAD");
    const beacon = one("beacon", "POST");
    const navigation = one("top-level-get", "GET");
    // Cross-site, SameSite=Lax keeps the cookie off every subresource and every POST (only a
    // top-level GET navigation would carry it); same-site, it goes everywhere.
    const cookieExpected = sameSite;
    const cookieWord = cookieExpected ? "with" : "without";

    // GETs never log out: 405 whether or not the cookie came along. The service's CORP
    // header hides the <img>'s answer from the page; CDP still sees its status.
    check(
      `${label}: <img> GET /auth/logout reached the API ${cookieWord} the cookie and answered 405`,
      img?.status === 405 && img.cookie === cookieExpected,
      describe(img),
    );
    check(
      `${label}: <iframe> GET /auth/logout reached the API ${cookieWord} the cookie and answered 405`,
      iframe?.status === 405 && iframe.cookie === cookieExpected,
      describe(iframe),
    );
    const formOk = sameSite
      ? // Same site: the Lax cookie comes along, so only the Origin check stands in the way.
        formStatus === 403 && formCode === "cross_site_request"
      : // Another site: no cookie, so no credential at all.
        formStatus === 401 && formCode === "token_required";
    check(
      `${label}: auto-submitted form POST arrived ${cookieWord} the cookie and was refused ${sameSite ? "403 cross_site_request" : "401 token_required"}`,
      formOk && form?.cookie === cookieExpected,
      `${describe(form)}, code ${formCode || "-"}`,
    );
    check(
      `${label}: no-cors fetch POST arrived ${cookieWord} the cookie and was refused ${sameSite ? "403" : "401"}`,
      fetchPost?.status === (sameSite ? 403 : 401) && fetchPost.cookie === cookieExpected,
      `${describe(fetchPost)}; in page: ${parsed["fetch-post-no-cors"] ?? "no result"}`,
    );
    check(
      `${label}: no-cors fetch HEAD arrived ${cookieWord} the cookie and answered 405`,
      fetchHead?.status === 405 && fetchHead.cookie === cookieExpected,
      `${describe(fetchHead)}; in page: ${parsed["fetch-head-no-cors"] ?? "no result"}`,
    );
    check(
      `${label}: sendBeacon POST arrived ${cookieWord} the cookie and was refused ${sameSite ? "403" : "401"}`,
      beacon?.status === (sameSite ? 403 : 401) && beacon.cookie === cookieExpected,
      `${describe(beacon)}; in page: ${parsed.beacon ?? "no result"}`,
    );
    // A top-level GET carries the Lax cookie even from another site: why GET had to go.
    check(
      `${label}: attacker-driven top-level GET /auth/logout carried the cookie and answered 405`,
      topLevel === 405 && navigation?.status === 405 && navigation.cookie === true,
      describe(navigation),
    );
    const noCorsDelete = parsed["fetch-delete-no-cors"] ?? "";
    check(
      `${label}: the browser refuses a no-cors DELETE before sending it`,
      noCorsDelete.startsWith("threw TypeError") && recorder.find("fetch-delete-no-cors").length === 0,
      noCorsDelete || "no result",
    );
    const corsDelete = recorder.find("fetch-delete-cors");
    const deleteAnswered = corsDelete.filter((e) => e.method === "DELETE" && e.status !== null);
    check(
      `${label}: a CORS DELETE never reaches the API (its preflight is not granted)`,
      deleteAnswered.length === 0 && (parsed["fetch-delete-cors"] ?? "").startsWith("threw TypeError"),
      `${corsDelete.map(describe).join(" | ") || "no request seen"}; in page: ${parsed["fetch-delete-cors"] ?? "no result"}`,
    );
  } finally {
    await context.close();
  }
}

async function sameOriginScenario(
  browser: Browser,
  api: string,
  apiDirect: string,
  session: IssuedSession,
): Promise<void> {
  const label = "same origin";
  const context = await browser.newContext();
  try {
    const recorder = new Recorder(context, api, session.token);
    await giveCookie(context, api, session);
    const page = await context.newPage();
    await recorder.attach(page);

    // 5. A top-level navigation to GET /auth/logout: 405 and nothing changes.
    const response = await page.goto(`${api}/auth/logout`, { timeout: PAGE_MS });
    await recorder.settle();
    const nav = recorder.find("/auth/logout", "GET")[0];
    check(
      `${label}: top-level GET ${api}/auth/logout answered 405 (Allow: POST, DELETE)`,
      response?.status() === 405 && (await response.headerValue("allow")) === "POST, DELETE",
      describe(nav),
    );
    check(
      `${label}: the browser sends ${COOKIE} to http://localhost over plain http (Secure cookie, secure context)`,
      nav?.cookie === true,
      nav?.cookie ? "Cookie header carried it" : "no cookie on the wire",
    );
    const statusAfterGet = await bearerStatus(apiDirect, session.token);
    check(
      `${label}: session still authenticates after GET /auth/logout`,
      statusAfterGet === 200,
      `status ${statusAfterGet}`,
    );
    const heldAfterGet = await jarCookie(context, api);
    check(
      `${label}: browser still holds ${COOKIE} after GET /auth/logout`,
      heldAfterGet?.value === session.token,
      heldAfterGet ? "held" : "gone",
    );

    // 6. The real thing: the app's own page logs out with a same-origin POST. Every response
    // of the API carries `Content-Security-Policy: default-src 'none'`, so a document the
    // API itself served (its JSON 401 at /auth/sessions) cannot fetch anything; shown here
    // with a harmless GET. The app's page is served by the Playwright route below instead,
    // a stand-in for a front-end on the same origin; the route is dropped before the
    // logout so that request goes to the network untouched.
    const apiDocument = await page.goto(`${api}/auth/sessions`, { timeout: PAGE_MS });
    const fromApiDocument = await withTimeout(
      page.evaluate(
        "fetch('/auth/sessions').then((r) => 'status ' + r.status, (e) => 'threw ' + e.name + ': ' + e.message)",
      ),
      PAGE_MS,
      "fetch from the API's document",
    );
    info(
      `document served by the API (GET /auth/sessions -> ${apiDocument?.status()}, CSP ${await apiDocument?.headerValue("content-security-policy")}): ` +
        `fetch('/auth/sessions') ${fromApiDocument}`,
    );
    const appPage = `${api}/app/`;
    await page.route(appPage, (route) =>
      route.fulfill({
        status: 200,
        contentType: "text/html",
        body: "<!doctype html><title>app</title><h1>Your sessions</h1>",
      }),
    );
    await page.goto(appPage, { timeout: PAGE_MS });
    await page.unrouteAll();
    const result = (await withTimeout(
      page.evaluate(
        "fetch('/auth/logout', { method: 'POST' }).then(async (r) => ({ status: r.status, body: await r.text() }), (e) => ({ status: 0, body: 'threw ' + e.name + ': ' + e.message }))",
      ),
      PAGE_MS,
      "same-origin logout",
    )) as { status: number; body: string };
    await recorder.settle();
    const post = recorder.find("/auth/logout", "POST")[0];
    recorder.print();
    check(
      `${label}: fetch('/auth/logout', {method: 'POST'}) answered 200`,
      result.status === 200 && result.body.includes("Logged out"),
      `${describe(post)}, body ${result.body}`,
    );
    check(
      `${label}: the logout response cleared the cookie`,
      (post?.setCookie ?? "").startsWith(`${COOKIE}=;`) && (post?.setCookie ?? "").includes("Max-Age=0"),
      post?.setCookie || "no Set-Cookie seen",
    );
    const statusAfterLogout = await bearerStatus(apiDirect, session.token);
    check(
      `${label}: session no longer authenticates (Bearer GET /auth/sessions)`,
      statusAfterLogout === 401,
      `status ${statusAfterLogout}`,
    );
    const heldAfterLogout = await jarCookie(context, api);
    check(
      `${label}: context.cookies() no longer holds ${COOKIE}`,
      heldAfterLogout === undefined,
      heldAfterLogout ? `still ${heldAfterLogout.value}` : "gone",
    );
  } finally {
    await context.close();
  }
}

// ---------------------------------------------------------------------------------------

// Everything to stop on the way out, whichever way out it is.
const servers: Server[] = [];
let browser: Browser | undefined;
let stopping: Promise<void> | undefined;

function stopEverything(): Promise<void> {
  stopping ??= (async () => {
    // Playwright kills Chromium's process group by its pid; on a forced exit its own
    // process.on("exit") hook does the same.
    if (browser) await withTimeout(browser.close(), 10_000, "browser close").catch(() => {});
    await Promise.all(servers.map(stopServer));
    await Promise.all([...groups].map(stopGroup));
  })();
  return stopping;
}

async function main(): Promise<void> {
  const started = Date.now();
  const apiPort = await freePort();
  // The browser's view of the API; Node talks to the same server on 127.0.0.1.
  const api = `http://localhost:${apiPort}`;
  const apiDirect = `http://127.0.0.1:${apiPort}`;
  let serverLog = (): string => "";
  try {
    const startedApi = await startApi(apiPort);
    serverLog = startedApi.log;
    check("npm start answers", true, `${apiDirect} after ${Date.now() - started} ms`);

    const run = `${Date.now()}-${process.pid}`;
    const crossSession = await createSession(`browser-test-${run}-cross-site`);
    const sameSiteSession = await createSession(`browser-test-${run}-same-site`);
    const ownSession = await createSession(`browser-test-${run}-same-origin`);
    const live = await Promise.all(
      [crossSession, sameSiteSession, ownSession].map((s) => bearerStatus(apiDirect, s.token)),
    );
    check(
      "session:create issued 3 sessions, each live by Bearer",
      live.every((status) => status === 200),
      live.join(", "),
    );

    const crossSite = await startAttacker("127.0.0.1", api);
    servers.push(crossSite.server);
    const sameSite = await startAttacker("localhost", api);
    servers.push(sameSite.server);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: CHROMIUM_ARGS,
      timeout: 30_000,
      // Signals are handled below, so that the server goes down with the browser.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
    });
    info(`Chromium ${browser.version()}`);

    await attackerScenario(
      browser,
      `cross-site ${crossSite.origin}`,
      crossSite.origin,
      api,
      apiDirect,
      crossSession,
      false,
    );
    await attackerScenario(
      browser,
      `same-site ${sameSite.origin}`,
      sameSite.origin,
      api,
      apiDirect,
      sameSiteSession,
      true,
    );
    await sameOriginScenario(browser, api, apiDirect, ownSession);
  } catch (error) {
    check("the run completed", false, message(error));
    const log = serverLog();
    if (log) console.log(`--- npm start output (tail) ---\n${log.slice(-3_000)}`);
  } finally {
    await stopEverything();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    console.log(`browser-test: ${signal}, stopping`);
    void stopEverything().finally(() => process.exit(1));
  });
}

const watchdog = setTimeout(() => {
  check(`the run finished within ${RUN_DEADLINE_MS / 1000} s`, false);
  console.log(`${passed} passed, ${failed} failed`);
  void stopEverything().finally(() => process.exit(1));
}, RUN_DEADLINE_MS);
watchdog.unref();

await main();
clearTimeout(watchdog);
