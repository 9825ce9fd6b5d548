// `npm run check:node-login`: the login flow that is not a Worker (examples/node-login/), end to
// end, as browsers use it. It makes two admin keys in a key file of its own (ADMIN_KEYS_FILE):
// one with sessions:create, sessions:end and sessions:data, one with sessions:create only; starts the real
// `npm start -- --env sharded` (its own port and state) serving them; and starts the example three times, as its
// README says, on the full key, on the key without sessions:end, and on a wrong key. Then fetch
// with a small cookie jar per browser, sending what a browser sends (User-Agent, Origin and
// Sec-Fetch-Site on a form post): alice signs in in browser A and in browser B, and both pages
// show her through whoami; A switches its workspace, kept in its session's data, and only A's
// page changes; a cross-site post is refused; A changes the password and B's next
// request is sent to the sign-in page while A stays signed in; B cannot sign in with the old
// password; A signs out, and A's old cookie is refused even when sent again. The key without the
// scope signs in but is refused 403 insufficient_scope when it would sign out everywhere, and the
// wrong key 401 invalid_token, through the example and called directly. Then the operator's
// key commands: `admin:keys -- --help` prints the usage and exits 0; `list`, given no --env,
// reads the environment the running server serves (both keys last used); `revoke` removes the
// key from the file, and `list` no longer has it. Last, no key and no session token appears in
// what the example or `npm start` printed. Prints one JSON report;
// exits 1 on any failure.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { freePort, startNpmStart } from "../../dev/npm-start.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const EXAMPLE = path.join(ROOT, "examples", "node-login", "server.ts");
const COOKIE = "__Host-session";
const TIMEOUT_MS = 30_000;
const run = promisify(execFile);

const state = mkdtempSync(path.join(tmpdir(), "node-login-e2e-"));
const keysFile = path.join(state, "admin-keys.json");
const env = { ADMIN_KEYS_FILE: keysFile };

async function createKey(name: string, scopes: string[]): Promise<string> {
  const args = ["run", "--silent", "admin:keys", "--", "create", "--name", name];
  const { stdout } = await run("npm", [...args, ...scopes.flatMap((scope) => ["--scope", scope])], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  return (JSON.parse(stdout) as { key: string }).key;
}

/** One instance of the example, on its own port, holding `key`. */
interface Example {
  base: string;
  child: ChildProcess;
  output(): string;
}

async function startExample(service: string, key: string): Promise<Example> {
  const port = await freePort();
  const child = spawn(process.execPath, [EXAMPLE], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), SESSION_SERVICE_URL: service, SESSION_ADMIN_KEY: key },
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream?.on("data", (chunk) => (output += chunk));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/login`)).status === 200) return { base, child, output: () => output };
    } catch {}
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the example did not come up:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

interface Page {
  status: number;
  /** Where a redirect sends the browser, else null. */
  location: string | null;
  body: string;
  setCookies: string[];
}

/** A browser: its User-Agent and cookie jar (one host, Path=/; expired cookies dropped). */
class Browser {
  jar = new Map<string, string>();
  userAgent: string;
  base: string;
  constructor(base: string, userAgent: string) {
    this.base = base;
    this.userAgent = userAgent;
  }

  /** One request, redirects not followed; a POST is a same-origin form post unless `headers` say otherwise. */
  async request(method: "GET" | "POST", pathname: string, form?: Record<string, string>, headers = {}): Promise<Page> {
    const cookie = [...this.jar].map(([name, value]) => `${name}=${value}`).join("; ");
    const response = await fetch(`${this.base}${pathname}`, {
      method,
      redirect: "manual",
      signal: AbortSignal.timeout(TIMEOUT_MS),
      headers: {
        "User-Agent": this.userAgent,
        ...(cookie ? { Cookie: cookie } : {}),
        ...(method === "POST"
          ? {
              Origin: this.base,
              "Sec-Fetch-Site": "same-origin",
              "Content-Type": "application/x-www-form-urlencoded",
            }
          : {}),
        ...headers,
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    const setCookies = response.headers.getSetCookie();
    for (const line of setCookies) {
      const [pair = "", ...attributes] = line.split(";").map((part) => part.trim());
      const at = pair.indexOf("=");
      const [name, value] = [pair.slice(0, at), pair.slice(at + 1)];
      const maxAge = attributes.find((attribute) => /^max-age=/i.test(attribute));
      const expires = attributes.find((attribute) => /^expires=/i.test(attribute));
      const gone =
        (maxAge !== undefined && Number(maxAge.slice(8)) <= 0) ||
        (expires !== undefined && Date.parse(expires.slice(8)) <= Date.now());
      if (gone) this.jar.delete(name);
      else this.jar.set(name, value);
    }
    return {
      status: response.status,
      location: response.headers.get("Location"),
      body: await response.text(),
      setCookies,
    };
  }

  /** A form post, then the page its redirect leads to, as a browser shows it (one redirect at most here). */
  async post(pathname: string, form: Record<string, string>): Promise<{ posted: Page; shown: Page }> {
    const posted = await this.request("POST", pathname, form);
    const shown = posted.location ? await this.request("GET", posted.location) : posted;
    return { posted, shown };
  }
}

/** A value the example's page shows, by the element's id. */
const shown = (page: Page, id: string) => new RegExp(`id="${id}">([^<]*)<`).exec(page.body)?.[1] ?? null;

const steps: { step: string; ok: boolean }[] = [];
const problems: string[] = [];
function expect(step: string, ok: boolean, detail: unknown = "") {
  steps.push({ step, ok });
  if (!ok) problems.push(`${step}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
}
/** What a step saw, for its failure message. */
const saw = (page: Page) => ({
  status: page.status,
  location: page.location,
  text: page.body
    .replace(/<(style|title)>[^<]*<\/\1>|<[^>]*>/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 300),
});

const CHROME =
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";

const examples: Example[] = [];
let server: Awaited<ReturnType<typeof startNpmStart>> | null = null;
const secrets: string[] = [];
let otherSessionsEnded: number | null = null;

try {
  const fullKey = await createKey("node-login", ["sessions:create", "sessions:end", "sessions:data"]);
  const createOnlyKey = await createKey("node-login-create-only", ["sessions:create"]);
  // The full key's id with another secret (its first character changed): well formed, and not the key.
  const dot = fullKey.indexOf(".") + 1;
  const wrongKey = `${fullKey.slice(0, dot)}${fullKey[dot] === "A" ? "B" : "A"}${fullKey.slice(dot + 1)}`;
  secrets.push(fullKey, createOnlyKey, wrongKey);

  const port = await freePort();
  const service = `http://127.0.0.1:${port}`;
  // Not the top level: `admin:keys list`, given no --env, must find the databases it serves.
  server = await startNpmStart(port, path.join(state, "npm-start"), ["--env", "sharded"], env);
  const example = await startExample(service, fullKey);
  examples.push(example);

  const a = new Browser(example.base, CHROME);
  const b = new Browser(example.base, FIREFOX);

  const before = await a.request("GET", "/");
  expect("A, no cookie: GET / redirects to /login", before.status === 303 && before.location === "/login", saw(before));
  const wrong = await a.request("POST", "/login", { username: "alice", password: "not-it" });
  expect(
    "a wrong password is 401 and sets no cookie",
    wrong.status === 401 && wrong.setCookies.length === 0,
    saw(wrong),
  );

  const signIn = async (browser: Browser, user: string, password: string) => {
    const { posted, shown: page } = await browser.post("/login", { username: user, password });
    return { posted, page, sessionId: shown(page, "session_id"), token: browser.jar.get(COOKIE) ?? null };
  };
  const inA = await signIn(a, "alice", "wonderland");
  const cookieLine = inA.posted.setCookies.find((line) => line.startsWith(`${COOKIE}=`)) ?? "";
  expect(
    "A signs in: 303 to / with the service's cookie (Secure, HttpOnly, SameSite=Lax, Path=/)",
    inA.posted.status === 303 &&
      inA.posted.location === "/" &&
      ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"].every((attribute) => cookieLine.includes(attribute)),
    { ...saw(inA.posted), setCookies: inA.posted.setCookies.map((line) => line.replace(/=[^;]*/, "=…")) },
  );
  expect(
    "A's page shows alice through whoami (session, authenticated_at, amr pwd)",
    inA.page.status === 200 &&
      shown(inA.page, "user_id") === "alice" &&
      inA.sessionId !== null &&
      !Number.isNaN(Date.parse(shown(inA.page, "authenticated_at") ?? "")) &&
      shown(inA.page, "amr") === "pwd",
    saw(inA.page),
  );
  const inB = await signIn(b, "alice", "wonderland");
  expect(
    "B signs in as alice too: another session, shown through whoami",
    inB.page.status === 200 && shown(inB.page, "user_id") === "alice" && inB.sessionId !== inA.sessionId,
    saw(inB.page),
  );
  if (inA.token) secrets.push(inA.token);
  if (inB.token) secrets.push(inB.token);

  // Application data on the session: set at sign-in, patched by A, read back through whoami.
  const switched = await a.post("/workspace", { workspace: "acme" });
  const bWorkspace = await b.request("GET", "/");
  expect(
    "A switches its workspace (PATCH of the session's data): A's page shows acme, B's still personal",
    shown(inA.page, "workspace") === "personal" &&
      switched.shown.status === 200 &&
      shown(switched.shown, "workspace") === "acme" &&
      shown(bWorkspace, "workspace") === "personal",
    { a: saw(switched.shown), b: saw(bWorkspace) },
  );

  // Another site's page posts the password form with A's cookie: refused before anything else.
  const forged = await a.request(
    "POST",
    "/password",
    { current: "wonderland", new: "forged-password" },
    { Origin: "https://evil.example", "Sec-Fetch-Site": "cross-site" },
  );
  const bAfterForged = await b.request("GET", "/");
  expect(
    "a cross-site post to /password is refused 403 and ends nothing",
    forged.status === 403 && bAfterForged.status === 200,
    { forged: saw(forged), b: saw(bAfterForged) },
  );

  const changed = await a.request("POST", "/password", { current: "wonderland", new: "looking-glass" });
  otherSessionsEnded = Number(/Signed out (\d+) other session/.exec(changed.body)?.[1] ?? Number.NaN);
  expect(
    "A changes the password: signed out 1 other session, A stays on its page",
    changed.status === 200 && otherSessionsEnded === 1 && shown(changed, "session_id") === inA.sessionId,
    saw(changed),
  );
  const bAfter = await b.request("GET", "/");
  expect(
    "B's session ended: GET / redirects to /login",
    bAfter.status === 303 && bAfter.location === "/login",
    saw(bAfter),
  );
  const bOut = await b.post("/logout", {});
  expect(
    "B, its session ended elsewhere, signs out: 303 to /login, the dead cookie cleared",
    bOut.posted.status === 303 && bOut.posted.location === "/login" && !b.jar.has(COOKIE),
    { ...saw(bOut.posted), jar: [...b.jar.keys()] },
  );
  const aAfter = await a.request("GET", "/");
  expect(
    "A is still signed in, same session",
    aAfter.status === 200 && shown(aAfter, "session_id") === inA.sessionId,
    saw(aAfter),
  );
  const oldPassword = await b.request("POST", "/login", { username: "alice", password: "wonderland" });
  expect("B cannot sign in with the old password", oldPassword.status === 401, saw(oldPassword));
  const again = await signIn(b, "alice", "looking-glass");
  expect(
    "B signs in with the new one",
    again.page.status === 200 && shown(again.page, "user_id") === "alice",
    saw(again.page),
  );
  if (again.token) secrets.push(again.token);

  const aToken = a.jar.get(COOKIE);
  const out = await a.post("/logout", {});
  expect(
    "A signs out: 303 to /login, the cookie cleared",
    out.posted.status === 303 && out.posted.location === "/login" && !a.jar.has(COOKIE) && out.shown.status === 200,
    { ...saw(out.posted), jar: [...a.jar.keys()] },
  );
  const afterOut = await a.request("GET", "/");
  expect(
    "A, signed out: GET / redirects to /login",
    afterOut.status === 303 && afterOut.location === "/login",
    saw(afterOut),
  );
  if (aToken) a.jar.set(COOKIE, aToken);
  const replayed = await a.request("GET", "/");
  expect(
    "A's old cookie sent again is refused: the session ended, not just the cookie",
    replayed.status === 303 && replayed.location === "/login",
    saw(replayed),
  );
  a.jar.delete(COOKIE);

  // A key without sessions:end signs in, and is refused when it would sign out everywhere.
  const createOnly = await startExample(service, createOnlyKey);
  examples.push(createOnly);
  const c = new Browser(createOnly.base, CHROME);
  const inC = await signIn(c, "bob", "wonderland");
  expect("the key without sessions:end signs bob in", shown(inC.page, "user_id") === "bob", saw(inC.page));
  if (inC.token) secrets.push(inC.token);
  const noScope = await c.request("POST", "/password", { current: "wonderland", new: "looking-glass" });
  expect(
    "…and its sign-out-everywhere is refused 403 insufficient_scope (the example answers 502, saying so)",
    noScope.status === 502 && noScope.body.includes("403 insufficient_scope"),
    saw(noScope),
  );
  const direct = (key: string, pathname: string, body: unknown) =>
    fetch(`${service}${pathname}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  const noScopeDirect = await direct(createOnlyKey, "/admin/users/bob/sessions/end", { reason: "password_changed" });
  const noScopeBody = (await noScopeDirect.json()) as { code?: string };
  expect(
    'called directly: 403 insufficient_scope, scope="sessions:end" in WWW-Authenticate',
    noScopeDirect.status === 403 &&
      noScopeBody.code === "insufficient_scope" &&
      (noScopeDirect.headers.get("WWW-Authenticate") ?? "").includes('scope="sessions:end"'),
    { status: noScopeDirect.status, body: noScopeBody },
  );
  const bobStill = await c.request("GET", "/");
  expect("bob's session is untouched", bobStill.status === 200, saw(bobStill));

  // A wrong key: nobody signs in.
  const wrongExample = await startExample(service, wrongKey);
  examples.push(wrongExample);
  const d = new Browser(wrongExample.base, FIREFOX);
  const wrongIn = await d.request("POST", "/login", { username: "alice", password: "wonderland" });
  expect(
    "a wrong key cannot sign anyone in: 401 invalid_token (the example answers 502, saying so), no cookie",
    wrongIn.status === 502 && wrongIn.body.includes("401 invalid_token") && wrongIn.setCookies.length === 0,
    saw(wrongIn),
  );
  const wrongDirect = await direct(wrongKey, "/admin/sessions", { userId: "alice", carrier: "cookie" });
  expect("called directly: 401", wrongDirect.status === 401, { status: wrongDirect.status });

  // The operator's key commands, as docs/admin-api.md writes them (the key file is this check's own).
  const adminKeys = async (...args: string[]) =>
    (await run("npm", ["run", "--silent", "admin:keys", "--", ...args], { cwd: ROOT, env: { ...process.env, ...env } }))
      .stdout;
  const help = await adminKeys("--help");
  expect("admin:keys -- --help: the usage, exit 0", help.startsWith("usage: npm run --silent admin:keys"), help);

  // The operator's list: names, scopes and each key's last use as this npm start recorded it; never a secret.
  const listed = await adminKeys("list");
  const keys = (JSON.parse(listed) as { keys: { name: string; lastUsedAt: string | null }[] }).keys;
  const usedAt = new Map(keys.map((key) => [key.name, key.lastUsedAt]));
  expect(
    "admin:keys list: both keys, each last used during this run, no secret or hash",
    keys.length === 2 &&
      [...usedAt.values()].every((at) => at !== null && Date.now() - Date.parse(at) < 600_000) &&
      !listed.includes("secretHash") &&
      !secrets.some((secret) => listed.includes(secret.split(".")[1] as string)),
    listed,
  );

  // Revoking a key removes it from the file the secret is made of: gone from the file and the list.
  const revokedId = createOnlyKey.slice("ssak_".length, createOnlyKey.indexOf("."));
  const revoked = await adminKeys("revoke", "--id", revokedId);
  const stored = (JSON.parse(readFileSync(keysFile, "utf8")) as { id: string }[]).map(({ id }) => id);
  const left = (JSON.parse(await adminKeys("list")) as { keys: { name: string }[] }).keys.map(({ name }) => name);
  expect(
    "admin:keys revoke: the key is gone from the key file and the list; the other stays",
    JSON.parse(revoked).revoked === revokedId &&
      stored.length === 1 &&
      !stored.includes(revokedId) &&
      left.join() === "node-login",
    { revoked, stored, left },
  );
} catch (error) {
  problems.push(error instanceof Error ? error.message : String(error));
} finally {
  for (const { child } of examples) child.kill("SIGTERM");
  const printed = [...examples.map((example) => example.output()), server?.log() ?? ""].join("\n");
  const leaked = secrets.filter((secret) => printed.includes(secret)).length;
  expect("no admin key or session token in what the example and npm start printed", leaked === 0, `${leaked} found`);
  await server?.stop();
  rmSync(state, { recursive: true, force: true });
}

console.log(JSON.stringify({ steps, otherSessionsEnded, problems }));
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exitCode = 1;
}
