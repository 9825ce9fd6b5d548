// Real-browser CSRF test of the logouts: `npm run test:browser` (playwright.config.ts starts
// `npm start`). The browser is given a session as the `__Host-session` cookie of the API
// origin http://localhost:<port>, then visits attacker pages served from two other origins:
//   - cross-SITE   http://127.0.0.1:<p>  (another site: SameSite=Lax keeps the cookie off
//                                         subresources and POSTs; Sec-Fetch-Site: cross-site)
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
// Every request the browser makes to the API is printed as `info:` lines (test/browser/recorder.ts).
import { execFile } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { type Browser, type BrowserContext, expect, test } from "@playwright/test";
import { sessionSetCookie } from "../../src/services/session-cookie.ts";
import { COOKIE, describe, info, Recorder, within } from "./recorder.ts";

const PAGE_MS = 15_000;

interface IssuedSession {
  id: string;
  token: string;
  expiresAt: string;
}

async function createSession(user: string): Promise<IssuedSession> {
  const command = ["run", "--silent", "session:create", "--", "--user", user];
  const { stdout } = await promisify(execFile)("npm", command, { encoding: "utf8" });
  return JSON.parse(stdout) as IssuedSession;
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
    if (body === undefined) res.writeHead(404).end();
    else res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" }).end(body);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { server, origin: `http://${host}:${port}` };
}

// ---------------------------------------------------------------------------------------
// The API, seen from Node (Bearer) and from the browser's cookie jar.

async function bearerStatus(apiDirect: string, token: string): Promise<number> {
  const response = await fetch(`${apiDirect}/auth/sessions`, { headers: { Authorization: `Bearer ${token}` } });
  await response.arrayBuffer();
  return response.status;
}

async function jarCookie(context: BrowserContext, api: string) {
  return (await context.cookies(api)).find((cookie) => cookie.name === COOKIE);
}

/**
 * Hands the browser the session the way the login worker would: a `Set-Cookie` from the API
 * origin carrying exactly what `sessionSetCookie()` (src/services/session-cookie.ts) builds. The response is
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
        headers: { "Set-Cookie": sessionSetCookie(COOKIE, session.token, maxAge), "Cache-Control": "no-store" },
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

let urls: { api: string; apiDirect: string };
const sessions: Record<"crossSite" | "sameSite" | "sameOrigin", IssuedSession> = {} as never;
const attackers: Record<"crossSite" | "sameSite", { server: Server; origin: string }> = {} as never;

test.beforeAll(async () => {
  urls = test.info().config.metadata as typeof urls;
  const root = await fetch(`${urls.apiDirect}/`);
  expect(root.status, "npm start answers (404 not_found at /)").toBe(404);

  const run = `${Date.now()}-${process.pid}`;
  sessions.crossSite = await createSession(`browser-test-${run}-cross-site`);
  sessions.sameSite = await createSession(`browser-test-${run}-same-site`);
  sessions.sameOrigin = await createSession(`browser-test-${run}-same-origin`);
  const live = await Promise.all(Object.values(sessions).map((s) => bearerStatus(urls.apiDirect, s.token)));
  expect(live, "session:create issued 3 sessions, each live by Bearer").toEqual([200, 200, 200]);

  attackers.crossSite = await startAttacker("127.0.0.1", urls.api);
  attackers.sameSite = await startAttacker("localhost", urls.api);
});

test.afterAll(async () => {
  for (const { server } of Object.values(attackers)) {
    server.closeAllConnections();
    server.close();
  }
});

async function attackerScenario(
  browser: Browser,
  label: string,
  attacker: string,
  session: IssuedSession,
  sameSite: boolean,
): Promise<void> {
  const { api, apiDirect } = urls;
  const context = await browser.newContext();
  const recorder = new Recorder(context, api, session.token);
  await giveCookie(context, api, session);
  const held = await jarCookie(context, api);
  expect
    .soft(
      held && {
        value: held.value,
        secure: held.secure,
        httpOnly: held.httpOnly,
        sameSite: held.sameSite,
        domain: held.domain,
        path: held.path,
      },
      `${label}: browser holds ${COOKIE} for ${api} before the visit`,
    )
    .toEqual({ value: session.token, secure: true, httpOnly: true, sameSite: "Lax", domain: "localhost", path: "/" });

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
    formCode = ((await within(5_000, response.json())) as { code?: string }).code ?? "";
  } catch (error) {
    info(`form submission: ${error instanceof Error ? error.message.split("\n")[0] : error}`);
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
    info(`top-level navigation: ${error instanceof Error ? error.message.split("\n")[0] : error}`);
  }
  await recorder.settle();
  recorder.print();
  info(`in-page fetch results: ${results || "(none reported)"}`);
  await page.close();
  const parsed = results ? (JSON.parse(results) as Record<string, string>) : {};

  expect
    .soft(await bearerStatus(apiDirect, session.token), `${label}: session still authenticates after the visit`)
    .toBe(200);
  expect.soft((await jarCookie(context, api))?.value, `${label}: browser still holds ${COOKIE}`).toBe(session.token);

  const seen = (via: string, method: string) => {
    const e = recorder.find(via, method)[0];
    return { status: e?.status ?? null, cookie: e?.cookie ?? null, seen: describe(e) };
  };
  // Cross-site, SameSite=Lax keeps the cookie off every subresource and every POST (only a
  // top-level GET navigation carries it); same-site, it goes everywhere.
  const cookie = sameSite;
  const word = cookie ? "with" : "without";
  const refused = sameSite ? 403 : 401;
  const wire = (status: number, carried: boolean) => ({ status, cookie: carried, seen: expect.any(String) });

  // GETs never log out: 405 whether or not the cookie came along. The service's CORP
  // header hides the <img>'s answer from the page; CDP still sees its status.
  expect
    .soft(seen("img", "GET"), `${label}: <img> GET reached the API ${word} the cookie, 405`)
    .toEqual(wire(405, cookie));
  expect
    .soft(seen("iframe", "GET"), `${label}: <iframe> GET reached the API ${word} the cookie, 405`)
    .toEqual(wire(405, cookie));
  expect
    .soft(
      { form: seen("form", "POST"), formStatus, formCode },
      `${label}: auto-submitted form POST arrived ${word} the cookie, refused ${refused}`,
    )
    .toEqual({
      form: wire(refused, cookie),
      formStatus: refused,
      // Same site: the Lax cookie comes along, so only the Origin check stands in the way;
      // another site: no cookie, so no credential at all.
      formCode: sameSite ? "cross_site_request" : "token_required",
    });
  expect
    .soft(seen("fetch-post", "POST"), `${label}: no-cors fetch POST ${word} the cookie, refused ${refused}`)
    .toEqual(wire(refused, cookie));
  expect
    .soft(seen("fetch-head", "HEAD"), `${label}: no-cors fetch HEAD ${word} the cookie, 405`)
    .toEqual(wire(405, cookie));
  expect
    .soft(seen("beacon", "POST"), `${label}: sendBeacon POST ${word} the cookie, refused ${refused}`)
    .toEqual(wire(refused, cookie));
  // A top-level GET carries the Lax cookie even from another site: why GET had to go.
  expect
    .soft(
      { topLevel, navigation: seen("top-level-get", "GET") },
      `${label}: attacker-driven top-level GET carried the cookie, 405`,
    )
    .toEqual({ topLevel: 405, navigation: wire(405, true) });
  expect
    .soft(
      { inPage: parsed["fetch-delete-no-cors"] ?? "", requests: recorder.find("fetch-delete-no-cors").length },
      `${label}: the browser refuses a no-cors DELETE before sending it`,
    )
    .toEqual({ inPage: expect.stringMatching(/^threw TypeError/), requests: 0 });
  const corsDelete = recorder.find("fetch-delete-cors");
  expect
    .soft(
      {
        inPage: parsed["fetch-delete-cors"] ?? "",
        answered: corsDelete.filter((e) => e.method === "DELETE" && e.status !== null).map(describe),
      },
      `${label}: a CORS DELETE never reaches the API (its preflight is not granted)`,
    )
    .toEqual({ inPage: expect.stringMatching(/^threw TypeError/), answered: [] });
  await context.close();
}

test("a cross-site page cannot log the user out", async ({ browser }) => {
  const { origin } = attackers.crossSite;
  await attackerScenario(browser, `cross-site ${origin}`, origin, sessions.crossSite, false);
});

test("a same-site page on another origin cannot log the user out", async ({ browser }) => {
  const { origin } = attackers.sameSite;
  await attackerScenario(browser, `same-site ${origin}`, origin, sessions.sameSite, true);
});

test("on the API's own origin: GET changes nothing, a same-origin POST logs out", async ({ browser }) => {
  const { api, apiDirect } = urls;
  const session = sessions.sameOrigin;
  const label = "same origin";
  const context = await browser.newContext();
  const recorder = new Recorder(context, api, session.token);
  await giveCookie(context, api, session);
  const page = await context.newPage();
  await recorder.attach(page);

  // A top-level navigation to GET /auth/logout: 405 and nothing changes.
  const response = await page.goto(`${api}/auth/logout`, { timeout: PAGE_MS });
  await recorder.settle();
  const nav = recorder.find("/auth/logout", "GET")[0];
  expect
    .soft(
      { status: response?.status(), allow: await response?.headerValue("allow") },
      `${label}: top-level GET /auth/logout`,
    )
    .toEqual({ status: 405, allow: "POST, DELETE" });
  expect
    .soft(nav?.cookie, `${label}: the browser sends ${COOKIE} to http://localhost over plain http (secure context)`)
    .toBe(true);
  expect
    .soft(await bearerStatus(apiDirect, session.token), `${label}: session still authenticates after GET`)
    .toBe(200);
  expect
    .soft((await jarCookie(context, api))?.value, `${label}: browser still holds ${COOKIE} after GET`)
    .toBe(session.token);

  // The real thing: the app's own page logs out with a same-origin POST. Every response
  // of the API carries `Content-Security-Policy: default-src 'none'`, so a document the
  // API itself served (its JSON at /auth/sessions) cannot fetch anything; shown here
  // with a harmless GET. The app's page is served by the Playwright route below instead,
  // a stand-in for a front-end on the same origin; the route is dropped before the
  // logout so that request goes to the network untouched.
  const apiDocument = await page.goto(`${api}/auth/sessions`, { timeout: PAGE_MS });
  const fromApiDocument = await page.evaluate(
    "fetch('/auth/sessions').then((r) => 'status ' + r.status, (e) => 'threw ' + e.name + ': ' + e.message)",
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
  const result = (await page.evaluate(
    "fetch('/auth/logout', { method: 'POST' }).then(async (r) => ({ status: r.status, body: await r.text() }), (e) => ({ status: 0, body: 'threw ' + e.name + ': ' + e.message }))",
  )) as { status: number; body: string };
  await recorder.settle();
  const post = recorder.find("/auth/logout", "POST")[0];
  recorder.print();
  expect.soft(result, `${label}: fetch('/auth/logout', {method: 'POST'}) answered 200`).toEqual({
    status: 200,
    body: JSON.stringify({ message: "Logged out" }),
  });
  expect
    .soft(post?.setCookie, `${label}: the logout response cleared the cookie`)
    .toMatch(new RegExp(`^${COOKIE}=;.*Max-Age=0`));
  expect.soft(await bearerStatus(apiDirect, session.token), `${label}: session no longer authenticates`).toBe(401);
  expect.soft(await jarCookie(context, api), `${label}: context.cookies() no longer holds ${COOKIE}`).toBeUndefined();
  await context.close();
});
