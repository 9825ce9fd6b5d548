// The README's curl tour and docs/operator-commands.md's commands, run by a client generated
// from the OpenAPI document (openapi-typescript → dist/openapi-types.ts, then openapi-fetch)
// through Prism's validating proxy (`prism proxy --errors`) in front of a local server
// (dev/local-server.ts).
// Prism turns any request or response that disagrees with the document into a 500 with an
// `sl-violations` header; that, an unexpected status or a body missing what the documents
// show fails the run. One call goes to the server directly: Prism answers a method the
// document does not list with its own 405, so the service's `GET /auth/logout` 405 is
// checked by the project's validator (test/openapi.ts, which reads `x-other-methods`).
//   npm run walkthrough                     (writes dist/openapi.json first)
//   npm run walkthrough -- --env sharded    (the same on the four databases of that environment:
//                                           the server and every operator command get --env)
//   OPENAPI_DOCUMENT=<file> node test/checks/walkthrough.ts    (check against another document)
import { execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify, stripVTControlCharacters } from "node:util";
import createClient from "openapi-fetch";
import { startLocalServer } from "../../dev/local-server.ts";
import type { paths } from "../../dist/openapi-types.ts";
import { bucketOf } from "../../src/db/shards.ts";
import { bucketKey, DEFAULT_REGION } from "../../src/domain/token.ts";
import { validateResponse } from "../openapi.ts";

const DOCUMENT = process.env.OPENAPI_DOCUMENT ?? "dist/openapi.json";
const { env } = parseArgs({ options: { env: { type: "string" } } }).values;
const envArgs = env === undefined ? [] : ["--env", env];
const CHROME_ON_MAC =
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

// Compile-time only: the generated types must keep each body's literals (`tsc` fails if not).
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const exact = <A, B>(proof: Equals<A, B>) => proof;

async function startPrism(document: string, upstream: URL) {
  const cli = fileURLToPath(import.meta.resolve("@stoplight/prism-cli/dist/index.js"));
  const args = [cli, "proxy", document, upstream.href, "--port", "0", "--errors", "--cors=false"];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const url = await new Promise<string>((resolve, reject) => {
    const read = (chunk: Buffer) => {
      log += stripVTControlCharacters(chunk.toString());
      const listening = /Prism is listening on (http:\/\/\S+)/.exec(log);
      if (listening?.[1]) resolve(listening[1]);
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    child.once("exit", (code) => reject(new Error(`prism exited with ${code}:\n${log}`)));
  });
  return { url, log: () => log, stop: () => child.kill() };
}

function fail(message: string): never {
  throw new Error(`walkthrough: ${message}`);
}

function check(what: string, ok: boolean, detail: unknown = ""): void {
  if (!ok) fail(`${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  console.log(`       ${what}`);
}

/** The call's status must be `status`, and Prism must have found nothing to object to. */
async function expectStatus<T extends { response: Response; data?: unknown; error?: unknown }>(
  status: number,
  what: string,
  call: Promise<T>,
  quiet = false,
) {
  const result = await call;
  const { response } = result;
  const violations = response.headers.get("sl-violations");
  if (violations !== null) fail(`${what}: Prism: ${violations}`);
  if (response.status !== status)
    fail(`${what}: expected ${status}, got ${response.status}: ${JSON.stringify(result.data ?? result.error)}`);
  if (!quiet) console.log(`  ${status}  ${what}`);
  return result;
}

// One user in 64 has session ids that begin with "-" (their bucket's first character), which
// a command line can take for an option: the walkthrough is always such a user, so the
// operator commands below are shown to take those ids.
let user = "";
for (let i = 0; ; i++) {
  user = `walkthrough-${Date.now()}-${i}`;
  if (bucketKey({ region: DEFAULT_REGION, bucket: await bucketOf(user) }).startsWith("-")) break;
}
// Asynchronous on purpose: a blocked event loop would miss Prism closing an idle connection.
async function operator<T>(command: string, ...args: string[]): Promise<T> {
  const npm = ["run", "--silent", command, "--", ...envArgs, ...args];
  return JSON.parse((await promisify(execFile)("npm", npm, { encoding: "utf8" })).stdout);
}
const sessionCreate = (...args: string[]) =>
  operator<{ id: string; token: string }>("session:create", "--user", user, ...args);
const otherUser = `${user}-bob`;
const bearer = (token: string) => ({ headers: { Authorization: `Bearer ${token}` } });

const server = await startLocalServer(env === undefined ? {} : { env });
let prism: Awaited<ReturnType<typeof startPrism>> | undefined;
try {
  prism = await startPrism(DOCUMENT, server.url);
  // An API client with its own User-Agent (Node's), as the README's curl tour: Bearer works from any client.
  const api = createClient<paths>({ baseUrl: prism.url });

  const laptop = await sessionCreate("--country", "DE", "--city", "Berlin", "--user-agent", CHROME_ON_MAC);
  const phone = await sessionCreate("--ip", "198.51.100.4");
  const tablet = await sessionCreate("--ttl", "3600");
  let token = laptop.token;

  const listed = await expectStatus(200, "GET /auth/sessions", api.GET("/auth/sessions", bearer(token)));
  const own = listed.data?.sessions.find((s) => s.id === listed.data?.currentSessionId);
  check("3 sessions, the laptop's current, parsed and located", listed.data?.sessions.length === 3, listed.data);
  check(
    "laptop: Chrome 131 on macOS · 127.0.0.1, Berlin, DE, desktop",
    own?.name === "Chrome 131 on macOS · 127.0.0.1" && own.location === "Berlin, DE" && own.device.type === "desktop",
    own,
  );

  const deleted = await expectStatus(
    200,
    "DELETE /auth/sessions/{phone}",
    api.DELETE("/auth/sessions/{id}", { params: { path: { id: phone.id } }, ...bearer(token) }),
  );
  exact<typeof deleted.data, { message: "Session deleted" } | undefined>(true);
  check('{"message": "Session deleted"}', deleted.data?.message === "Session deleted", deleted.data);

  // Another user's session (on four databases, most likely in another database): refused
  // once the caller's token is proven, as the contract says for any session not the caller's.
  const bob = await operator<{ id: string; token: string }>("session:create", "--user", otherUser);
  const notMine = await expectStatus(
    401,
    "DELETE /auth/sessions/{another user's session}",
    api.DELETE("/auth/sessions/{id}", { params: { path: { id: bob.id } }, ...bearer(token) }),
  );
  check("code not_authorized", notMine.error?.code === "not_authorized", notMine.error);
  const bobListed = await operator<{ sessions: { id: string }[] }>("session:list", "--user", otherUser);
  check("the other user's session is still live", bobListed.sessions[0]?.id === bob.id, bobListed);

  const phoneGone = await expectStatus(
    401,
    "GET /auth/sessions with the phone's token",
    api.GET("/auth/sessions", bearer(phone.token)),
  );
  exact<
    NonNullable<typeof phoneGone.error>["code"],
    | "invalid_token"
    | "reauthentication_required"
    | "cross_site_request"
    | "rate_limited"
    | "uri_too_long"
    | "internal_error"
    | "service_unavailable"
    | "moving"
  >(true);
  check("code invalid_token", phoneGone.error?.code === "invalid_token", phoneGone.error);

  // Straight to the server: see the header comment.
  const url = new URL("/auth/logout", server.url);
  const get = await fetch(url, bearer(token));
  await validateResponse("GET", url.href, get);
  check(
    "GET /auth/logout: 405, Allow: POST, DELETE (direct, checked by test/openapi.ts)",
    get.status === 405 && get.headers.get("Allow") === "POST, DELETE",
    get.status,
  );

  const others = await expectStatus(
    200,
    "DELETE /auth/logout?scope=others",
    api.DELETE("/auth/logout", { params: { query: { scope: "others" } }, ...bearer(token) }),
  );
  check('"Logged out of 1 other session"', others.data?.message === "Logged out of 1 other session", others.data);
  await expectStatus(
    401,
    "GET /auth/sessions with the tablet's token",
    api.GET("/auth/sessions", bearer(tablet.token)),
  );

  const events = await expectStatus(200, "GET /auth/events", api.GET("/auth/events", bearer(token)));
  const types = events.data?.events.map((e) => e.type);
  check(
    "logout_others, deleted, created ×3",
    JSON.stringify(types) === JSON.stringify(["logout_others", "deleted", "created", "created", "created"]),
    types,
  );

  // Any backend, on any stack, turns the token into its user.
  const whoami = await expectStatus(200, "GET /auth/whoami", api.GET("/auth/whoami", bearer(token)));
  check(
    "the laptop's session and its user",
    whoami.data?.session_id === laptop.id && whoami.data.user_id === user && whoami.data.device_bound === false,
    whoami.data,
  );
  const fresh = await expectStatus(
    200,
    "GET /auth/whoami?max_age=3600",
    api.GET("/auth/whoami", { params: { query: { max_age: 3600 } }, ...bearer(token) }),
  );
  check("fresh: signed in within the hour", fresh.data?.fresh === true, fresh.data);
  // This server runs without ACCESS_TOKEN_KEYS: access tokens are off, and their route is not there.
  const off = await expectStatus(404, "POST /auth/token (access tokens off)", api.POST("/auth/token", bearer(token)));
  check("code not_found", off.error?.code === "not_found", off.error);

  const cookie = { headers: { Cookie: `__Host-session=${token}` } };
  const loggedOut = await expectStatus(200, "POST /auth/logout with the cookie", api.POST("/auth/logout", cookie));
  exact<typeof loggedOut.data, { message: "Logged out" } | undefined>(true);
  check(
    "the cookie is cleared",
    loggedOut.response.headers.get("Set-Cookie")?.startsWith("__Host-session=; Max-Age=0") === true,
    loggedOut.response.headers.get("Set-Cookie") ?? "no Set-Cookie",
  );

  token = (await sessionCreate()).token;
  const all = await expectStatus(200, "DELETE /auth/logout", api.DELETE("/auth/logout", bearer(token)));
  check('"Logged out of all sessions"', all.data?.message === "Logged out of all sessions", all.data);
  await expectStatus(401, "GET /auth/sessions after logging out everywhere", api.GET("/auth/sessions", bearer(token)));
  await expectStatus(401, "GET /auth/whoami after logging out everywhere", api.GET("/auth/whoami", bearer(token)));

  // Operator commands: the same local D1, through the same code as the RPC methods.
  const kept = await sessionCreate();
  const other = await sessionCreate();
  const fromOperator = await operator<{ sessions: { id: string }[] }>("session:list", "--user", user);
  check(
    "session:list shows both",
    fromOperator.sessions.length === 2 && fromOperator.sessions[1]?.id === kept.id,
    fromOperator,
  );
  const endedOthers = await operator<{ ended: number }>(
    "session:end",
    ...["--user", user, "--except", kept.id, "--reason", "password_changed"],
  );
  check("session:end --user --except ends 1", endedOthers.ended === 1, endedOthers);
  await expectStatus(401, "GET /auth/sessions with the ended session", api.GET("/auth/sessions", bearer(other.token)));
  const log = await expectStatus(200, "GET /auth/events", api.GET("/auth/events", bearer(kept.token)));
  const newest = log.data?.events[0];
  check(
    "newest event: ended, password_changed",
    newest?.type === "ended" && newest.reason === "password_changed",
    newest,
  );
  const endedOne = await operator<{ ended: boolean }>("session:end", "--session", kept.id);
  check("session:end --session ends it", endedOne.ended === true, endedOne);
  await expectStatus(401, "GET /auth/sessions after session:end", api.GET("/auth/sessions", bearer(kept.token)));

  // A browser's session, issued cookie-only as a login worker issues it: its cookie works (from its
  // browser), its value sent as Bearer is refused as a dead token.
  const browser = await operator<{ token: string }>(
    "session:create",
    ...["--user", otherUser, "--carrier", "cookie", "--user-agent", CHROME_ON_MAC],
  );
  const fromBrowser = { headers: { Cookie: `__Host-session=${browser.token}`, "User-Agent": CHROME_ON_MAC } };
  await expectStatus(200, "GET /auth/sessions with a browser's cookie", api.GET("/auth/sessions", fromBrowser));
  const asBearer = await expectStatus(
    401,
    "GET /auth/sessions with a browser's cookie value as Bearer",
    api.GET("/auth/sessions", bearer(browser.token)),
  );
  check("code invalid_token", asBearer.error?.code === "invalid_token", asBearer.error);

  const document = await expectStatus(200, "GET /openapi.json", api.GET("/openapi.json"));
  check("openapi 3.1.0", document.data?.openapi === "3.1.0", document.data?.openapi);

  // Refused tokens from one client IP, past 30 a minute, become 429. A fresh IP each run:
  // wrangler dev keeps a client's CF-Connecting-IP and its limiter counts persist.
  const ip = `2001:db8::${(Date.now() % 0xffff).toString(16)}:${(process.pid % 0xffff).toString(16)}`;
  const dead = { headers: { Authorization: `Bearer ${token}`, "CF-Connecting-IP": ip } };
  // wrangler dev counts in windows aligned to the wall-clock minute: 31 requests that straddle
  // a minute boundary on a slow machine would be split across two windows. Start in a fresh one.
  const leftInMinute = 60_000 - (Date.now() % 60_000);
  if (leftInMinute < 30_000) await new Promise((resolve) => setTimeout(resolve, leftInMinute + 500));
  for (let i = 1; i <= 30; i++)
    await expectStatus(401, `dead token #${i} from ${ip}`, api.GET("/auth/sessions", dead), true);
  console.log(`  401  GET /auth/sessions ×30 with a dead token from ${ip}`);
  const limited = await expectStatus(429, `dead token #31 from ${ip}`, api.GET("/auth/sessions", dead));
  check(
    "code rate_limited, Retry-After: 60",
    limited.error?.code === "rate_limited" && limited.response.headers.get("Retry-After") === "60",
    limited.error,
  );
  console.log(
    `walkthrough: ok${env === undefined ? "" : ` (--env ${env})`}, every response through Prism matched the document`,
  );
} catch (error) {
  if (prism) console.error(`--- prism (tail) ---\n${prism.log().slice(-3_000)}`);
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  prism?.stop();
  await server.stop();
}
