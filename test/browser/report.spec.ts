// "Was this you?" in a real browser: `npm run test:browser`. The demo (`npm run demo`,
// examples/login-worker in front of the service) on a fresh database of its own (DEMO_STATE), so
// a second browser is a device the user has never used. In order: alice signs in on her laptop;
// a stranger signs in as alice from another browser (Firefox on Windows); the demo's mailbox
// shows the new-sign-in message; its link opens the report page, which shows that sign-in and
// ends it on the click; the stranger's browser is signed out at its next page load, the
// laptop's devices page no longer lists it, and following the link again is refused. The
// screenshot docs/images/demo-report.png is taken here.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Browser, type BrowserContext, chromium, expect, type Page, test } from "@playwright/test";

const PORT = Number(process.env.REPORT_TEST_PORT ?? 8791);
const ORIGIN = `http://localhost:${PORT}`;
const FIREFOX_WINDOWS = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0";
const SCREENSHOTS = path.join(import.meta.dirname, "..", "..", "docs", "images");
// Without these Chromium keeps calling home, which a closed network turns into a flood.
const QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic"];

let demo: ChildProcess;
let state: string;
let browser: Browser;

test.beforeAll(async () => {
  state = mkdtempSync(path.join(tmpdir(), "demo-report-"));
  demo = spawn("npm", ["run", "demo", "--", "--ip", "127.0.0.1", "--port", String(PORT)], {
    env: { ...process.env, DEMO_STATE: state },
    detached: true,
  });
  // Its output only matters when it fails to start.
  let output = "";
  for (const stream of [demo.stdout, demo.stderr]) stream?.on("data", (chunk) => (output += chunk));
  demo.on("exit", (code) => code && console.error(output));
  await expect
    .poll(async () => (await fetch(`${ORIGIN}/`).catch(() => ({ status: 0 }))).status, { timeout: 90_000 })
    .toBe(200);
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: QUIET });
});

test.afterAll(async () => {
  await browser?.close();
  if (demo.pid) process.kill(-demo.pid, "SIGTERM");
  rmSync(state, { recursive: true, force: true });
});

async function signIn(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${ORIGIN}/`);
  await expect(page.locator("h1")).toHaveText("Sign in");
  await page.fill("input[name=user]", "alice");
  await page.fill("input[name=password]", "wonderland");
  await page.click("button[type=submit]");
  await expect(page.locator("h1")).toHaveText("Your devices");
  return page;
}

/** The session the devices page marks as this device: its id. */
async function thisSession(page: Page): Promise<string> {
  const row = page.locator("tr", { has: page.locator(".tag.current") });
  return (await row.getAttribute("data-session")) as string;
}

test("a stranger's sign-in, ended from the new-sign-in message alone", async () => {
  const laptop = await browser.newContext({ viewport: { width: 900, height: 700 } });
  const devices = await signIn(laptop);
  const laptopId = await thisSession(devices);

  const strangersBrowser = await browser.newContext({ userAgent: FIREFOX_WINDOWS });
  const stranger = await signIn(strangersBrowser);
  const strangerId = await thisSession(stranger);
  await devices.reload();
  await expect(devices.locator(`tr[data-session="${strangerId}"]`)).toBeVisible();

  // The newest message is the stranger's sign-in; its link carries the token in the fragment only.
  const mail = await laptop.newPage();
  await mail.goto(`${ORIGIN}/mailbox`);
  const link = mail.locator(".notice").first().locator("a.report-link");
  const href = (await link.getAttribute("href")) as string;
  expect(href).toMatch(new RegExp(`^${ORIGIN}/report#${strangerId}~[A-Za-z0-9_-]{43}$`));

  // Following it shows that sign-in and ends nothing: the page only read it.
  const reads: number[] = [];
  mail.on("response", (r) => new URL(r.url()).pathname === "/auth/report" && reads.push(r.status()));
  await link.click();
  await expect(mail.locator("h1")).toHaveText("Was this you?");
  await expect(mail.locator("#device")).toHaveText(/^Firefox 133 on Windows/);
  // The token left the address bar and the history with the page's first script.
  expect(mail.url()).toBe(`${ORIGIN}/report`);
  await stranger.reload();
  await expect(stranger.locator("h1")).toHaveText("Your devices");
  await mail.screenshot({ path: path.join(SCREENSHOTS, "demo-report.png") });

  const ended = mail.waitForResponse((r) => r.request().method() === "POST" && r.url().endsWith("/auth/report"));
  await mail.locator("#confirm").click();
  expect((await ended).status()).toBe(200);
  await expect(mail.locator("#done")).toBeVisible();
  expect(reads).toEqual([200, 200]);

  // The stranger is signed out at the next page load, and the laptop's list no longer has it.
  await stranger.reload();
  await expect(stranger.locator("h1")).toHaveText("Sign in");
  expect((await strangersBrowser.request.get(`${ORIGIN}/me`)).status()).toBe(401);
  await devices.reload();
  await expect(devices.locator(`tr[data-session="${laptopId}"]`)).toBeVisible();
  await expect(devices.locator(`tr[data-session="${strangerId}"]`)).toHaveCount(0);
  // The security log says why, and who: the user, from the message.
  const ending = devices.locator(`li[data-session="${strangerId}"][data-type="ended"]`);
  await expect(ending.locator(".what")).toHaveText("Ended: you reported it wasn't you");
  await expect(ending).toContainText("· by you, from the new-sign-in message");

  // The same link again, from the message: refused, nothing more ended.
  await mail.goto(`${ORIGIN}/mailbox`);
  await mail.locator(".notice").first().locator("a.report-link").click();
  await expect(mail.locator("#error")).toHaveText("This report link was used already: that sign-in was ended then.");
  await expect(mail.locator("#sign-in")).toBeHidden();
  await devices.reload();
  await expect(devices.locator(`tr[data-session="${laptopId}"]`)).toBeVisible();
});
