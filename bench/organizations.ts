// The organizations' scale benchmark (docs/benchmark-method.md, "Organizations at scale"):
//   npm run bench:orgs                            # 10,000 organizations, 5 providers each
//   npm run bench:orgs -- --organizations 200     # smaller
// Markdown to stdout, progress to stderr. On wrangler's dev server (dev/local-server.ts) over a
// fresh local D1 in a temp dir, with an admin key and ORGANIZATION_SECRETS_KEYS made for the run:
// 1. Registration: each organization (POST /admin/organizations) and its five providers (POST
//    /admin/organizations/{id}/providers: inline jwks or jwks_uri, two of five with push and its
//    Authorization), CONCURRENCY calls at a time; calls per second, each kind's median and p95,
//    and the D1 file's growth.
// 2. A provider's route, cold and warm: POST /upstreams/<name>/backchannel-logout with a
//    well-formed logout token signed by a key the provider does not have (400, nothing written),
//    for ROUTE_NAMES providers of as many organizations; each name's first call (cold: the
//    isolate reads the provider from D1), then the same names again within the isolate's 30 s
//    (warm: kept), a chunk at a time, one request at a time.
// 3. A session's request: GET /auth/sessions by a member's token and by a non-member's,
//    interleaved, one at a time.
// Ratios within the run are what it claims, never a time on its own: the dev server is one
// local workerd and SQLite, not Cloudflare's edge. Exits 1 on an unexpected status or a
// warning or error the worker logged.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { parseArgs } from "node:util";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { writePrivate } from "../dev/dev-server.ts";
import { migrateLocal, startLocalServer } from "../dev/local-server.ts";
import { newAdminKey } from "../src/domain/admin-keys.ts";
import { fmt, log, median, problems } from "./harness.ts";

const USAGE = "usage: npm run bench:orgs [-- --organizations <N>]";
const { values } = (() => {
  try {
    return parseArgs({ options: { organizations: { type: "string", default: "10000" } } });
  } catch {
    console.error(USAGE);
    process.exit(2);
  }
})();
const ORGANIZATIONS = Number(values.organizations);
if (!Number.isInteger(ORGANIZATIONS) || ORGANIZATIONS < 1) {
  console.error(USAGE);
  process.exit(2);
}
const PROVIDERS = 5;
const CONCURRENCY = 16;
/** Providers measured cold then warm (of as many organizations), and how many per chunk: a chunk's warm pass comes well within the isolate's 30 s. */
const ROUTE_NAMES = Math.min(ORGANIZATIONS, 1000);
const CHUNK = 100;
/** Requests of each kind of session, interleaved. */
const SESSION_REQUESTS = 500;

const p95 = (times: number[]) => [...times].sort((a, b) => a - b)[Math.floor(times.length * 0.95)] ?? Number.NaN;
const ms = (value: number) => fmt(value, 2);

/** The run's providers' key (inline `jwks`), and another, which signs the tokens they refuse. */
const theirs = await generateKeyPair("ES256", { extractable: true });
const forger = await generateKeyPair("ES256");
const JWKS = { keys: [{ ...(await exportJWK(theirs.publicKey)), kid: "k1", alg: "ES256" }] };

const orgId = (i: number) => `org_bench${String(i).padStart(17, "0")}`;
const providerName = (i: number, j: number) => `o${i}-p${j}`;
const issuerOf = (i: number) => `https://idp-${i}.bench.example`;

/** Provider j of organization i: inline keys or a key set's URL; 1 and 3 push, with an Authorization. */
function providerOf(i: number, j: number): Record<string, unknown> {
  const keys = j % 2 === 0 ? { jwks: JWKS } : { jwks_uri: `${issuerOf(i)}/p${j}/jwks` };
  const push =
    j === 1 || j === 3
      ? { push: { endpoint_url: `${issuerOf(i)}/p${j}/ssf/push` }, authorization: `Bearer push-secret-${i}-${j}` }
      : {};
  return { name: providerName(i, j), issuer: `${issuerOf(i)}/p${j}`, client_id: "sessions-app", ...keys, ...push };
}

/** Secrets for the run (an admin key, the providers' secrets' key), in a file wrangler reads as --env-file. */
async function secretsFile(state: string): Promise<{ file: string; key: string }> {
  const { stored, key } = await newAdminKey("bench", ["organizations", "sessions:create"], new Date());
  const sealing = JSON.stringify([{ kty: "oct", kid: "bench", k: randomBytes(32).toString("base64url") }]);
  const file = join(state, "bench-secrets.env");
  // Single quotes: dotenv takes the JSON as it is.
  writePrivate(file, `ADMIN_KEYS='${JSON.stringify([stored])}'\nORGANIZATION_SECRETS_KEYS='${sealing}'\n`);
  process.env.CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV = "true";
  return { file, key };
}

/** One request's time in ms, its status checked. */
async function timed(url: URL, init: RequestInit, expected: number, what: string): Promise<number> {
  const start = performance.now();
  const response = await fetch(url, init);
  const body = await response.text();
  const took = performance.now() - start;
  if (response.status !== expected && problems.length < 20)
    problems.push(`${what}: ${response.status} (expected ${expected}) ${body.slice(0, 200)}`);
  return took;
}

/** Runs `work(i)` for i in [0, count), `CONCURRENCY` at a time. */
async function pool(count: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/** The local D1's size (pages in use, WAL included) and its organizations' rows. */
function databaseSize(state: string): { bytes: number; rows: Record<string, number> } {
  const dir = join(state, "v3", "d1", "miniflare-D1DatabaseObject");
  const [file] = readdirSync(dir).filter((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite");
  const db = new DatabaseSync(join(dir, file as string), { readOnly: true });
  try {
    const one = (sql: string) => Number(Object.values(db.prepare(sql).get() ?? {})[0]);
    const rows = Object.fromEntries(
      ["organizations", "organization_policies", "organization_providers"].map((table) => [
        table,
        one(`SELECT count(*) FROM ${table}`),
      ]),
    );
    return { bytes: one("PRAGMA page_count") * one("PRAGMA page_size"), rows };
  } finally {
    db.close();
  }
}

async function main(): Promise<string> {
  const state = mkdtempSync(join(tmpdir(), "session-bench-orgs-"));
  try {
    log(`fresh local D1 in ${state}`);
    migrateLocal({ persistTo: state });
    const before = databaseSize(state);
    const { file, key } = await secretsFile(state);
    process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
    const logged: string[] = [];
    const service = await startLocalServer({
      migrate: false,
      persistTo: state,
      envFiles: [file],
      onLog: (level, message) => {
        if (level === "warn" || level === "error") logged.push(`${level}: ${message.slice(0, 300)}`);
      },
    });
    try {
      const admin = (body: unknown): RequestInit => ({
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      const url = (path: string) => new URL(path, service.url);

      // 1. Registration.
      log(
        `registering ${fmt(ORGANIZATIONS)} organizations with ${PROVIDERS} providers each, ${CONCURRENCY} calls at a time`,
      );
      const creates: number[] = [];
      const registers: number[] = [];
      const registrationStart = performance.now();
      await pool(ORGANIZATIONS, async (i) => {
        const id = orgId(i);
        const body = { id, name: `Bench customer ${i}` };
        creates.push(await timed(url("/admin/organizations"), admin(body), 201, "create"));
        for (let j = 0; j < PROVIDERS; j++)
          registers.push(
            await timed(url(`/admin/organizations/${id}/providers`), admin(providerOf(i, j)), 201, "provider"),
          );
        if ((i + 1) % 1000 === 0) log(`${fmt(i + 1)} organizations registered`);
      });
      const registrationSeconds = (performance.now() - registrationStart) / 1000;
      const after = databaseSize(state);

      // 2. A provider's route, cold then warm, a chunk of names at a time.
      log(`a provider's route: ${fmt(ROUTE_NAMES)} providers, cold then warm`);
      const token = await new SignJWT({ events: { "http://schemas.openid.net/event/backchannel-logout": {} } })
        .setProtectedHeader({ alg: "ES256", kid: "k1", typ: "logout+jwt" })
        .setIssuer("https://unknown.bench.example")
        .setAudience("sessions-app")
        .setSubject("nobody")
        .setJti(crypto.randomUUID())
        .setIssuedAt()
        .sign(forger.privateKey);
      const logout = (name: string) =>
        timed(
          url(`/upstreams/${name}/backchannel-logout`),
          {
            method: "POST",
            headers: { "Content-Type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ logout_token: token }).toString(),
          },
          400,
          "backchannel-logout",
        );
      // Organizations spread over the whole directory; provider 0 of each (inline keys).
      const step = ORGANIZATIONS / ROUTE_NAMES;
      const names = Array.from({ length: ROUTE_NAMES }, (_, k) => providerName(Math.floor(k * step), 0));
      const cold: number[] = [];
      const warm: number[] = [];
      for (let start = 0; start < names.length; start += CHUNK) {
        const chunk = names.slice(start, start + CHUNK);
        for (const name of chunk) cold.push(await logout(name));
        for (const name of chunk) warm.push(await logout(name));
      }

      // 3. A member's session request and a non-member's, interleaved.
      log("a session's request: a member's and a non-member's");
      const issue = async (organization: string | null) => {
        const userId = `user-${crypto.randomUUID()}`;
        const response = await fetch(url("/admin/sessions"), admin({ userId, organization }));
        if (response.status !== 201) problems.push(`POST /admin/sessions: ${response.status}`);
        return ((await response.json()) as { token: string }).token;
      };
      const member = await issue(orgId(ORGANIZATIONS - 1));
      const outsider = await issue(null);
      const list = (token: string) =>
        timed(url("/auth/sessions"), { headers: { Authorization: `Bearer ${token}` } }, 200, "GET /auth/sessions");
      const memberTimes: number[] = [];
      const outsiderTimes: number[] = [];
      for (let k = 0; k < 20; k++) await Promise.all([list(member), list(outsider)]);
      for (let k = 0; k < SESSION_REQUESTS; k++) {
        memberTimes.push(await list(member));
        outsiderTimes.push(await list(outsider));
      }
      if (logged.length > 0)
        problems.push(`the worker logged ${logged.length} warning(s) or error(s), e.g. ${logged[0]}`);

      const calls = creates.length + registers.length;
      const growth = after.bytes - before.bytes;
      const row = (what: string, times: number[]) =>
        `| ${what} | ${fmt(times.length)} | ${ms(median(times))} | ${ms(p95(times))} |`;
      const ratio = (a: number[], b: number[]) => fmt(median(a) / median(b), 2);
      return [
        `## Organizations at scale (\`npm run bench:orgs${ORGANIZATIONS === 10_000 ? "" : ` -- --organizations ${ORGANIZATIONS}`}\`, ${new Date().toISOString().slice(0, 16)} UTC)`,
        "",
        `${fmt(ORGANIZATIONS)} organizations and ${fmt(ORGANIZATIONS * PROVIDERS)} providers registered over the admin API, ${CONCURRENCY} calls at a time, in ${fmt(registrationSeconds)} s: **${fmt(calls / registrationSeconds)} calls per second**. Times in ms on wrangler's local dev server (one workerd, local SQLite): compare them within the run.`,
        "",
        "| Call | Calls | Median ms | p95 ms |",
        "|---|--:|--:|--:|",
        row("`POST /admin/organizations`", creates),
        row("`POST /admin/organizations/{id}/providers`", registers),
        "",
        `The local D1 grew by ${fmt(growth / 1_048_576, 1)} MB (${fmt(growth / ORGANIZATIONS)} bytes per organization with its providers): ${Object.entries(
          after.rows,
        )
          .map(([table, rows]) => `${fmt(rows)} rows in \`${table}\``)
          .join(", ")}.`,
        "",
        "| Request | Requests | Median ms | p95 ms | Ratio |",
        "|---|--:|--:|--:|--:|",
        `${row("A provider's back-channel logout, cold (its first call: read from D1)", cold)} ${ratio(cold, warm)} |`,
        `${row("The same providers again, warm (kept by the isolate)", warm)} 1 |`,
        `${row("`GET /auth/sessions`, a member's session", memberTimes)} ${ratio(memberTimes, outsiderTimes)} |`,
        `${row("`GET /auth/sessions`, outside any organization", outsiderTimes)} 1 |`,
        "",
      ].join("\n");
    } finally {
      await service.stop();
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

try {
  console.log(await main());
} catch (error) {
  problems.push(`failed: ${error instanceof Error ? (error.stack ?? error.message) : error}`);
}
for (const problem of problems) log(`FAIL: ${problem}`);
process.exit(problems.length > 0 ? 1 : 0);
