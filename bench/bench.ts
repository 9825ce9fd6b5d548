// The benchmark (BENCHMARKS.md): throughput as ratios to a bare worker measured in the same
// run, and what D1 reads, writes and spends per operation.
//   npm run bench                 # measure; Markdown to stdout, progress to stderr
//   npm run bench -- --write      # ...and put it into BENCHMARKS.md (only when the run had no problem)
//
// 1. Bundle: `wrangler deploy --dry-run` (test/checks/bundle-size.ts).
// 2. A fresh local D1 in a temp dir; on it, through getPlatformProxy's D1 binding:
//    - the cost of each operation: the statements (src/db/sessions.ts, src/db/events.ts) the routes call,
//      on users holding 1, 10 and 100 sessions, summing D1's own `meta` (rows_read,
//      rows_written, duration) over the round trip; first on a near-empty table, then again
//      once the table holds every seeded session (>= 200,000);
//    - seeding: rows built by `buildSession` (src/services/issue-session.ts, the issuing code of
//      SessionService.create) and inserted in batches, each with its `created` event.
// 3. Load: the service and the bare worker (bench/bare/) on wrangler's dev server
//    (dev/local-server.ts), autocannon with CONNECTIONS connections, AMOUNT requests per
//    row (PAIRED_AMOUNT for an operation and its own batch replayed), REPETITIONS interleaved
//    repetitions; medians. Each destructive request has its own session; a logout-all its own
//    user holding exactly N.
// 4. The worker's own time: bench/own/ runs the bare worker's and the service's
//    `fetch` in a loop inside workerd, on the no-database paths, with no dev server per call;
//    then each operation, its D1 answers replayed, and the lists' layers one by one.
// 5. The report (bench/report.ts): Markdown on stdout, and into BENCHMARKS.md with --write.
// Each phase is a file of bench/: seed.ts and cost.ts (2), load.ts (3), own-time.ts (4),
// report.ts (5); harness.ts holds what they share; this file runs them in order.
// Exits 1 when a request got an unexpected status, or the worker logged anything (it logs
// only 5xx and retried D1 calls), or an operation's rows read grew with the table.
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { getPlatformProxy } from "wrangler";
import { devKeySet, writePrivate } from "../dev/dev-server.ts";
import { migrateLocal, startLocalServer } from "../dev/local-server.ts";
import { readConfig } from "../src/domain/config.ts";
import { measureBundle } from "../test/checks/bundle-size.ts";
import { COST_TABLE_SIZES, type Cost, measureCosts } from "./cost.ts";
import { fmt, log, PROJECT, problems } from "./harness.ts";
import { fire, loadRows, REPETITIONS, type Row, type Run, sizeAnswers, WARMUP_AMOUNT } from "./load.ts";
import { type OwnTime, operationTimes, ownTimes, partTimes } from "./own-time.ts";
import { markdownOf, writeIntoBenchmarksMd } from "./report.ts";
import { BIG_TABLE, seedUsers } from "./seed.ts";

const args = process.argv.slice(2);
const WRITE = args.includes("--write");
if (args.some((arg) => arg !== "--write")) {
  console.error("usage: npm run bench [-- --write]");
  process.exit(2);
}

async function main(): Promise<void> {
  const wall = performance.now();
  const startedAt = new Date();
  const loadStart = loadavg();
  log("measuring the bundle (wrangler deploy --dry-run)");
  const bundle = await measureBundle();

  const state = mkdtempSync(join(tmpdir(), "session-bench-"));
  try {
    log(`fresh local D1 in ${state}`);
    migrateLocal({ persistTo: state });
    // wrangler keeps `--persist-to <dir>` state in <dir>/v3; getPlatformProxy wants that v3 itself.
    const proxy = await getPlatformProxy<Env>({
      configPath: join(PROJECT, "wrangler.toml"),
      persist: { path: join(state, "v3") },
    });
    let costs: { small: Cost[]; large: Cost[]; tableRows: number };
    let rows: Row[];
    const seedStart = performance.now();
    try {
      const config = readConfig(proxy.env);
      log("cost per operation on a near-empty table");
      const small = await measureCosts(proxy.env, config);
      log("seeding the load rows and the big table through buildSession, in bulk");
      rows = await loadRows(proxy.env, config);
      const [seededRow] = (await proxy.env.DB.prepare("SELECT count(*) AS n FROM sessions").all<{ n: number }>())
        .results;
      const filler = Math.ceil(Math.max(0, BIG_TABLE - (seededRow?.n ?? 0)) / 100);
      for (let i = 0; i < filler; i += 100) await seedUsers(proxy.env.DB, config, Math.min(100, filler - i), 100);
      log(`seeded in ${fmt((performance.now() - seedStart) / 1000)} s`);
      const [countRow] = (await proxy.env.DB.prepare("SELECT count(*) AS n FROM sessions").all<{ n: number }>())
        .results;
      const tableRows = countRow?.n ?? 0;
      log(`the table holds ${fmt(tableRows)} sessions; cost per operation again`);
      const large = await measureCosts(proxy.env, config);
      costs = { small, large, tableRows };
      for (const cost of small) {
        const big = large.find((c) => c.key === cost.key && c.n === cost.n) as Cost;
        if (big.rowsRead > cost.rowsRead + cost.statements || big.rowsWritten !== cost.rowsWritten)
          problems.push(`${cost.key} at ${cost.n}: rows read/written grew with the table`);
      }
      if (tableRows < 200_000) problems.push(`the table held only ${tableRows} sessions`);
    } finally {
      await proxy.dispose();
    }
    const seedSeconds = (performance.now() - seedStart) / 1000;

    log("starting the service and the bare worker (wrangler's dev server)");
    // No network here: the dev server's fetch of a `request.cf` template would only fail noisily.
    process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
    const envFiles = [accessTokenSecrets(state)];
    const logged: string[] = [];
    const bareConfig = join(PROJECT, "bench", "bare", "wrangler.toml");
    const ownConfig = join(PROJECT, "bench", "own", "wrangler.toml");
    const [service, bare, ownLoop] = await Promise.all([
      startLocalServer({
        migrate: false,
        persistTo: state,
        envFiles,
        onLog: (level, message) => logged.push(`${level}: ${message}`),
      }),
      // The run's key set too, for `POST /batch?sign`.
      startLocalServer({ config: bareConfig, migrate: false, persistTo: state, envFiles }),
      startLocalServer({ config: ownConfig, migrate: false, persistTo: state, envFiles }),
    ]);
    const urls = { bare: bare.url, service: service.url };
    let own: OwnTime[] = [];
    let cpu = new Map<string, number>();
    let parts = new Map<string, number>();
    const runs: Run[][] = [];
    const loadStartTime = performance.now();
    try {
      await checkServed(service.url);
      await sizeAnswers(urls, rows);
      log("warming up");
      for (const row of rows.filter((row) => !row.destructive)) await fire(urls[row.server], row, WARMUP_AMOUNT);
      for (let r = 0; r < REPETITIONS; r++) {
        const rep: Run[] = [];
        for (const row of rows) {
          rep.push(await fire(urls[row.server], row));
        }
        log(`repetition ${r + 1}: ${rep.map((run) => fmt(run.rps)).join(", ")} req/s`);
        runs.push(rep);
      }
      log("the worker's own time per request, inside workerd");
      own = await ownTimes(ownLoop.url);
      log("the worker's CPU per operation, its D1 answers replayed");
      const tabled = costs.large.filter((c) => COST_TABLE_SIZES.includes(c.n));
      cpu = await operationTimes(ownLoop.url, tabled);
      log("where a list's CPU goes, layer by layer");
      parts = await partTimes(ownLoop.url, tabled);
    } finally {
      await Promise.all([service.stop(), bare.stop(), ownLoop.stop()]);
    }
    const loadSeconds = (performance.now() - loadStartTime) / 1000;
    if (logged.length > 0) problems.push(`the worker logged ${logged.length} line(s), e.g. ${logged[0]}`);

    const totalSeconds = (performance.now() - wall) / 1000;
    const loadEnd = loadavg();
    const command = `npm run bench${args.length > 0 ? ` -- ${args.join(" ")}` : ""}`;
    const markdown = markdownOf({
      command,
      startedAt,
      seconds: { total: totalSeconds, seed: seedSeconds, load: loadSeconds },
      loadStart,
      loadEnd,
      rows,
      runs,
      own,
      cpu,
      parts,
      costs,
      bundle,
    });
    console.log(markdown);
    if (WRITE && problems.length === 0) {
      writeIntoBenchmarksMd(markdown);
      log("updated BENCHMARKS.md");
    } else if (WRITE) {
      log("not updating BENCHMARKS.md: this run had problems");
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

/**
 * Access tokens on (POST /auth/token answers 404 without them), for the service and the own-time
 * loop: a key set made for this run by `npm run token:keys`'s script (its stdout into a file only
 * this user can read), in a secrets file in the run's temp dir, which wrangler reads as
 * `--env-file` would: no key on a command line, where `ps` shows it to every user.
 */
function accessTokenSecrets(state: string): string {
  const keys = devKeySet(join(state, "access-token-keys.json"), "ACCESS_TOKEN_KEYS");
  const secrets = join(state, "bench-secrets.env");
  // Single quotes: dotenv takes the JSON as it is.
  writePrivate(
    secrets,
    `ACCESS_TOKEN_KEYS='${keys}'\nACCESS_TOKEN_ISSUER=https://sessions.bench.example\nACCESS_TOKEN_AUDIENCE=https://api.bench.example\n`,
  );
  // Wrangler reads no env file when the caller's environment says "false" (dev/dev.ts).
  process.env.CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV = "true";
  return secrets;
}

/** The dev server serves /openapi.json, and refuses other methods there with `Allow`. */
async function checkServed(base: URL): Promise<void> {
  const document = await fetch(new URL("/openapi.json", base));
  if (document.status !== 200 || document.headers.get("x-frame-options") !== "DENY")
    problems.push(`GET /openapi.json: ${document.status}, X-Frame-Options ${document.headers.get("x-frame-options")}`);
  await document.arrayBuffer();
  const post = await fetch(new URL("/openapi.json", base), { method: "POST" });
  if (post.status !== 405 || post.headers.get("allow") !== "GET, HEAD")
    problems.push(`POST /openapi.json: ${post.status}, Allow ${post.headers.get("allow")}`);
  await post.arrayBuffer();
}

try {
  await main();
} catch (error) {
  problems.push(`failed: ${error instanceof Error ? (error.stack ?? error.message) : error}`);
}
for (const problem of problems) log(`FAIL: ${problem}`);
process.exit(problems.length > 0 ? 1 : 0);
