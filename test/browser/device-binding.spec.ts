// Device-bound sessions in a real browser: `npm run test:browser`. Debian's Chromium does DBSC
// only over HTTPS with a certificate it trusts and with the feature flags below (Linux has no
// hardware key; the flag allows a software one). The test makes a certificate, serves the demo
// (`npm run demo`: examples/login-worker in front of the service) over HTTPS with a bound cookie
// of 130 seconds (Chromium renews it on a request made in its last two minutes, so the test
// sees a refresh 10 seconds after the last one), and then, in order:
//   1. signs in, sees the session registered (the devices page marks it device-bound), and
//      keeps working across at least two refreshes: the page lists the devices itself, calling
//      GET /auth/sessions with the browser's cookies, and ends another session of the user with
//      DELETE /auth/sessions/:id;
//   2. copies the session cookie into a second browser context and into a plain HTTP client:
//      both refused, by the page and by the API;
//   3. ends that session from the devices page of another device: the first browser's next
//      refresh answers `continue: false` and it is signed out;
//   4. the same flow in a Chromium without the flags: an ordinary session that works as before
//      (and ends the user's other sessions from the page), shown with where it was last used;
//      its cookie copied into a second browser context with another User-Agent is refused
//      (the session context check) and holds the session until the user signs in again;
//   5. support access opened by an agent at the demo's support desk: marked on the customer's
//      devices page with the agent and the ticket, and ended there.
// On the way, the page's security log (GET /auth/events) says what ended, why and by whom, with
// times in words and the browser's local time on hover.
// The demo's screenshots in docs/images/ are taken here.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Browser, type BrowserContext, chromium, expect, type Page, test } from "@playwright/test";

const PORT = Number(process.env.DEMO_TEST_PORT ?? 8789);
const ORIGIN = `https://localhost:${PORT}`;
// Chromium 156 renews a bound cookie ahead of its expiry, on any request made in its last 120
// seconds, and signs at most 6 proofs in 9 minutes (registration included). A cookie shorter
// than that window has every request sign one, which spends them all in two or three page
// loads; 10 seconds more gives each refresh 10 quiet seconds after it.
const REFRESH_AHEAD_SECONDS = 120;
const BOUND_SECONDS = REFRESH_AHEAD_SECONDS + 10;
const FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
const SCREENSHOTS = path.join(import.meta.dirname, "..", "..", "docs", "images");
const DBSC_FEATURES = [
  "--enable-features=DeviceBoundSessions,EnableBoundSessionCredentialsSoftwareKeysForManualTesting",
];
// Without these Chromium keeps calling home, which a closed network turns into a flood.
const QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic"];

let demo: ChildProcess;
let cert: string;
let spki: string;

/** A certificate for localhost, and the base64 SHA-256 of its public key, which Chromium is told to trust. */
function makeCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "demo-cert-"));
  const key = path.join(dir, "key.pem");
  const certificate = path.join(dir, "cert.pem");
  execFileSync("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    key,
    "-out",
    certificate,
    "-days",
    "1",
    "-subj",
    "/CN=localhost",
    "-addext",
    "subjectAltName=DNS:localhost,IP:127.0.0.1",
  ]);
  return { key, cert: certificate };
}

/** A plain HTTPS client (not a browser): the status, the body as text, and the cookies set. */
function plain(
  method: string,
  pathname: string,
  headers: Record<string, string>,
  body = "",
): Promise<{ status: number; body: string; cookies: string[] }> {
  return new Promise((resolve, reject) => {
    const sent = request(`${ORIGIN}${pathname}`, { method, ca: cert, headers }, (response) => {
      let text = "";
      response.on("data", (chunk) => {
        text += chunk;
      });
      response.on("end", () =>
        resolve({ status: response.statusCode ?? 0, body: text, cookies: response.headers["set-cookie"] ?? [] }),
      );
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

/** GET with the given cookies: the status and the body. */
async function plainGet(
  pathname: string,
  cookie: string,
  userAgent?: string,
): Promise<{ status: number; body: string }> {
  const { status, body } = await plain("GET", pathname, {
    Cookie: cookie,
    ...(userAgent ? { "User-Agent": userAgent } : {}),
  });
  return { status, body };
}

/** Signs in from a plain client (no Fetch Metadata: an ordinary session); its session token. */
async function plainSignIn(user: string): Promise<string> {
  const headers = { "Content-Type": "application/json", "User-Agent": FIREFOX_LINUX };
  const signedIn = await plain("POST", "/login", headers, JSON.stringify({ user, password: "wonderland" }));
  expect(signedIn.status).toBe(200);
  return (/^__Host-session=([^;]+)/.exec(signedIn.cookies[0] ?? "") as RegExpExecArray)[1] as string;
}

/** The page's next call to the service's API: method and path, and the answer's status. */
async function apiCall(page: Page, method: string, pathname: string): Promise<number> {
  const response = await page.waitForResponse(
    (r) => r.request().method() === method && new URL(r.url()).pathname === pathname,
    { timeout: 15_000 },
  );
  return response.status();
}

/** The browser's bound cookie now, if it holds a live one: only the login and a refresh set it. */
async function boundCookieOf(context: BrowserContext) {
  return (await context.cookies()).find((cookie) => cookie.name === "__Host-session-bound")?.value ?? null;
}

async function launch(dbsc: boolean): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [`--ignore-certificate-errors-spki-list=${spki}`, ...QUIET, ...(dbsc ? DBSC_FEATURES : [])],
  });
}

async function signIn(context: BrowserContext, user = "alice"): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${ORIGIN}/`);
  await expect(page.locator("h1")).toHaveText("Sign in");
  await page.fill("input[name=user]", user);
  await page.fill("input[name=password]", "wonderland");
  await page.click("button[type=submit]");
  await expect(page.locator("h1")).toHaveText("Your devices");
  return page;
}

const thisDevice = (page: Page) => page.locator("tr", { has: page.locator(".tag.current") });

/** The security log's entry of this type for this session. */
const logged = (page: Page, sessionId: string, type: string) =>
  page.locator(`#security-log li[data-session="${sessionId}"][data-type="${type}"]`);

// The laptop's browser: its local time is neither UTC nor the machine's.
const LOCALE = "en-GB";
const TIME_ZONE = "Asia/Tokyo";

async function sessionCookieOf(context: BrowserContext) {
  return (await context.cookies()).find((cookie) => cookie.name === "__Host-session");
}

test.beforeAll(async () => {
  const files = makeCertificate();
  cert = readFileSync(files.cert, "utf8");
  spki = createHash("sha256")
    .update(new X509Certificate(cert).publicKey.export({ type: "spki", format: "der" }))
    .digest("base64");
  demo = spawn(
    "npm",
    [
      "run",
      "demo",
      "--",
      "--ip",
      "127.0.0.1",
      "--port",
      String(PORT),
      "--local-protocol",
      "https",
      "--https-key-path",
      files.key,
      "--https-cert-path",
      files.cert,
    ],
    { env: { ...process.env, SESSION_BOUND_COOKIE_SECONDS: String(BOUND_SECONDS) }, detached: true },
  );
  // Its output only matters when it fails to start.
  let output = "";
  for (const stream of [demo.stdout, demo.stderr]) stream?.on("data", (chunk) => (output += chunk));
  demo.on("exit", (code) => code && console.error(output));
  await expect
    .poll(async () => (await plainGet("/", "").catch(() => ({ status: 0 }))).status, { timeout: 90_000 })
    .toBe(200);
});

test.afterAll(() => {
  if (demo.pid) process.kill(-demo.pid, "SIGTERM");
});

test.describe.configure({ mode: "serial", timeout: 240_000 });

/** Chromium's own account of its device-bound sessions (CDP), one line per registration, refresh or challenge. */
async function watchBinding(context: BrowserContext): Promise<string[]> {
  const cdp = await context.newCDPSession(await context.newPage());
  const results: string[] = [];
  cdp.on("Network.deviceBoundSessionEventOccurred" as never, (event: object) => {
    results.push(...(JSON.stringify(event).match(/"\w+Result":"\w+"/g) ?? []));
  });
  await cdp.send("Network.enable");
  await cdp.send("Network.enableDeviceBoundSessions" as never, { enable: true } as never);
  return results;
}

/** Signs in with DBSC and waits until the devices page marks this session device-bound; its id. */
async function signInBound(context: BrowserContext): Promise<{ page: Page; sessionId: string }> {
  const page = await signIn(context);
  // Registration runs in the background right after the login response.
  await expect(async () => {
    await page.reload();
    await expect(thisDevice(page).locator(".tag.bound")).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
  return { page, sessionId: (await thisDevice(page).getAttribute("data-session")) as string };
}

test("a device-bound session: registered, refreshed, and worthless when copied", async () => {
  const browser = await launch(true);
  try {
    // Another of alice's devices, which the laptop will end.
    const other = await plainSignIn("alice");
    const otherId = other.split(".")[0] as string;
    const laptop = await browser.newContext({
      viewport: { width: 900, height: 800 },
      locale: LOCALE,
      timezoneId: TIME_ZONE,
    });
    const binding = await watchBinding(laptop);
    const { page, sessionId } = await signInBound(laptop);
    expect(binding).toContain('"fetchResult":"Success"');

    // Each wait brings the bound cookie into its last two minutes: the next page load makes the
    // browser renew it with a proof, every page load still finds the session, and the page
    // lists the devices itself: GET /auth/sessions by the browser's cookies, the one way a
    // device-bound session can (its token alone is refused).
    const seen = new Set([await boundCookieOf(laptop)]);
    for (let i = 0; i < 2; i++) {
      const before = await boundCookieOf(laptop);
      await page.waitForTimeout((BOUND_SECONDS - REFRESH_AHEAD_SECONDS + 2) * 1000);
      const listed = apiCall(page, "GET", "/auth/sessions");
      await page.reload();
      expect(await listed).toBe(200);
      await expect(thisDevice(page).locator(".tag.bound")).toBeVisible();
      await expect.poll(() => boundCookieOf(laptop)).not.toBe(before);
      seen.add(await boundCookieOf(laptop));
    }
    expect(seen.size).toBe(3);
    expect(seen.has(null)).toBe(false);
    expect(binding.filter((result) => result === '"refreshResult":"Refreshed"').length).toBeGreaterThanOrEqual(2);
    await page.screenshot({ path: path.join(SCREENSHOTS, "demo-devices.png") });

    // It ends the other device's session through the API: DELETE /auth/sessions/:id, by cookie.
    const otherRow = page.locator(`tr[data-session="${otherId}"]`);
    const deleted = apiCall(page, "DELETE", `/auth/sessions/${otherId}`);
    const relisted = apiCall(page, "GET", "/auth/sessions");
    await otherRow.locator("button", { hasText: "Sign out" }).click();
    expect([await deleted, await relisted]).toEqual([200, 200]);
    await expect(otherRow).toHaveCount(0);
    await expect(thisDevice(page).locator(".tag.bound")).toBeVisible();
    expect((await plainGet("/me", `__Host-session=${other}`)).status).toBe(401);
    // The security log has it: what ended and why, which session, by whom, when, in words; the
    // exact time, in the browser's locale and zone, on hover.
    const ended = logged(page, otherId, "deleted");
    await expect(ended.locator(".what")).toHaveText("Signed out from another device");
    await expect(ended.locator(".muted")).toHaveText(/^a device signed in from .+ · by this device$/);
    const when = ended.locator("time");
    await expect(when).toHaveText("just now");
    const at = new Date((await when.getAttribute("datetime")) as string);
    const local = new Intl.DateTimeFormat(LOCALE, { dateStyle: "medium", timeStyle: "long", timeZone: TIME_ZONE });
    await expect(when).toHaveAttribute("title", local.format(at));
    await expect(thisDevice(page).locator("time")).toHaveText(/^(just now|\d+ minutes? ago)$/);
    // Older times, as the page words them.
    const words = await page.evaluate(() => {
      // The page's own globals (this project's types have no DOM).
      type Time = { dateTime: string; textContent: string | null };
      const { document, ago } = globalThis as unknown as {
        document: { createElement(tag: "time"): Time };
        ago(time: Time): void;
      };
      return [20e3, 2 * 3600e3, 26 * 3600e3].map((before) => {
        const time = document.createElement("time");
        time.dateTime = new Date(Date.now() - before).toISOString();
        ago(time);
        return time.textContent;
      });
    });
    expect(words).toEqual(["just now", "2 hours ago", "yesterday"]);

    // A thief with the session cookie: another browser profile, and a plain HTTP client.
    const stolen = (await sessionCookieOf(laptop)) as NonNullable<Awaited<ReturnType<typeof sessionCookieOf>>>;
    expect(stolen.value.startsWith(`${sessionId}.`)).toBe(true);
    const thief = await browser.newContext();
    await thief.addCookies([stolen]);
    const thiefPage = await thief.newPage();
    await thiefPage.goto(`${ORIGIN}/`);
    await expect(thiefPage.locator("h1")).toHaveText("Sign in");
    const copied = await plainGet("/me", `__Host-session=${stolen.value}`);
    expect(copied).toEqual({ status: 401, body: JSON.stringify({ error: "sign in first" }) });
    const byApi = await plainGet("/auth/sessions", `__Host-session=${stolen.value}`);
    expect(byApi).toEqual({
      status: 401,
      body: JSON.stringify({ code: "invalid_token", message: "The access token is missing, invalid or expired." }),
    });
    // The laptop itself is still signed in.
    await page.reload();
    await expect(page.locator("h1")).toHaveText("Your devices");
  } finally {
    await browser.close();
  }
});

test("ended from another device's page: the next refresh is told continue: false", async () => {
  // Fresh browsers: Chromium limits how many proofs one profile signs in a few minutes.
  const browser = await launch(true);
  const other = await launch(false);
  try {
    const laptop = await browser.newContext();
    const binding = await watchBinding(laptop);
    const { page, sessionId } = await signInBound(laptop);

    const phonePage = await signIn(await other.newContext({ viewport: { width: 900, height: 640 } }));
    const laptopRow = phonePage.locator(`tr[data-session="${sessionId}"]`);
    await expect(laptopRow.locator(".tag.bound")).toBeVisible();
    await laptopRow.locator("button", { hasText: "Sign out" }).click();
    await expect(phonePage.locator(`tr[data-session="${sessionId}"]`)).toHaveCount(0);

    // The page load ends with the sign-in page at once; the refresh it starts is told the end.
    await page.waitForTimeout((BOUND_SECONDS - REFRESH_AHEAD_SECONDS + 2) * 1000);
    await page.reload();
    await expect(page.locator("h1")).toHaveText("Sign in");
    await expect.poll(() => binding.at(-1)).toBe('"fetchResult":"ServerRequestedTermination"');
    await page.screenshot({ path: path.join(SCREENSHOTS, "demo-sign-in.png") });
  } finally {
    await other.close();
    await browser.close();
  }
});

test("without DBSC the same flow is an ordinary session", async () => {
  const browser = await launch(false);
  try {
    const context = await browser.newContext();
    const page = await signIn(context, "bob");
    await page.waitForTimeout(2_000);
    await page.reload();
    await expect(thisDevice(page)).toBeVisible();
    await expect(thisDevice(page).locator(".tag.bound")).toHaveCount(0);
    // The page says where each session was last used from: this one, from this browser's
    // family (the row's name carries its version, the context does not).
    const family = (await thisDevice(page).locator("strong").textContent())?.split(" ")[0];
    await expect(thisDevice(page).locator(".last-seen")).toHaveText(new RegExp(`^from ${family} on \\w+`));
    // An unbound session's cookie works from any client with the same browser and OS (the
    // session context check); another browser's copy would be held.
    const cookie = (await sessionCookieOf(context))?.value;
    const userAgent = await page.evaluate(() => navigator.userAgent);
    expect((await plainGet("/me", `__Host-session=${cookie}`, userAgent)).status).toBe(200);
    // Every other session of bob's ends from the page too, through the API.
    const elsewhere = await plainSignIn("bob");
    await page.reload();
    await expect(page.locator(`tr[data-session="${elsewhere.split(".")[0]}"]`)).toBeVisible();
    const endedOthers = apiCall(page, "DELETE", "/auth/logout");
    await page.click("#sign-out-others");
    expect(await endedOthers).toBe(200);
    await expect(page.locator("tr")).toHaveCount(1);
    await expect(thisDevice(page)).toBeVisible();
    expect((await plainGet("/me", `__Host-session=${elsewhere}`)).status).toBe(401);
    await expect(logged(page, elsewhere.split(".")[0] as string, "logout_others").locator(".what")).toHaveText(
      "Signed out with all other devices",
    );
    // A password change (to the same one, so the next tests still sign in) ends the others,
    // and the log says why and that the product did it.
    const another = (await plainSignIn("bob")).split(".")[0] as string;
    const changed = await page.evaluate(async () => {
      const body = JSON.stringify({ newPassword: "wonderland" });
      return (
        await fetch("/password", { method: "POST", headers: { "Content-Type": "application/json" }, body })
      ).json();
    });
    expect(changed).toEqual({ passwordChanged: true, otherSessionsEnded: 1 });
    await page.reload();
    const ended = logged(page, another, "ended");
    await expect(ended.locator(".what")).toHaveText("Ended: the password was changed");
    await expect(ended.locator(".muted")).toHaveText(/ · by the service$/);
    await page.click("form[action='/sign-out'] button");
    await expect(page.locator("h1")).toHaveText("Sign in");
    expect((await plainGet("/me", `__Host-session=${cookie}`)).status).toBe(401);

    // A thief replays the cookie of a new session in a second browser context with another
    // User-Agent: refused by the page and by the API, and the session is held, so the victim
    // signs in again (the copy dies with the reauthentication).
    const victim = await signIn(context, "bob");
    const stolen = (await sessionCookieOf(context)) as NonNullable<Awaited<ReturnType<typeof sessionCookieOf>>>;
    const thief = await browser.newContext({ userAgent: FIREFOX_LINUX });
    await thief.addCookies([stolen]);
    const thiefPage = await thief.newPage();
    await thiefPage.goto(`${ORIGIN}/`);
    await expect(thiefPage.locator("h1")).toHaveText("Sign in");
    expect(await plainGet("/auth/sessions", `__Host-session=${stolen.value}`, FIREFOX_LINUX)).toEqual({
      status: 401,
      body: JSON.stringify({
        code: "reauthentication_required",
        message:
          "Sign in again: your last sign-in is too old to end other sessions, or this session was used from another browser or network, or your identity provider asked you to sign in again.",
      }),
    });
    await victim.reload();
    await expect(victim.locator("h1")).toHaveText("Sign in");
  } finally {
    await browser.close();
  }
});

test("support access: marked on the customer's devices page, with the agent and the ticket, and ended there", async () => {
  const browser = await launch(false);
  try {
    const page = await signIn(await browser.newContext({ viewport: { width: 900, height: 640 } }), "bob");
    // The agent signs in and opens support access to bob's account at the demo's support desk.
    const agent = await plainSignIn("carol");
    const headers = {
      Cookie: `__Host-session=${agent}`,
      "Content-Type": "application/json",
      "User-Agent": FIREFOX_LINUX,
    };
    const opened = await plain(
      "POST",
      "/support",
      headers,
      JSON.stringify({ user: "bob", reason: "Ticket 4711: invoices" }),
    );
    expect(opened.status).toBe(200);
    const { token } = JSON.parse(opened.body) as { token: string };
    const supported = await plainGet("/me", `__Host-session=${token}`);
    expect(JSON.parse(supported.body)).toMatchObject({ userId: "bob", actor: { sub: "carol" } });

    await page.reload();
    const row = page.locator(`tr[data-session="${token.split(".")[0]}"]`);
    await expect(row).toHaveClass("support-access");
    await expect(row.locator("strong")).toHaveText("carol");
    await expect(row.locator(".tag.support")).toHaveText("support access");
    await expect(row.locator(".support-reason")).toContainText("Ticket 4711: invoices");
    await page.screenshot({ path: path.join(SCREENSHOTS, "demo-support.png") });

    const ended = apiCall(page, "DELETE", `/auth/sessions/${token.split(".")[0]}`);
    await row.locator("button", { hasText: "End access" }).click();
    expect(await ended).toBe(200);
    await expect(row).toHaveCount(0);
    expect((await plainGet("/me", `__Host-session=${token}`)).status).toBe(401);
  } finally {
    await browser.close();
  }
});
