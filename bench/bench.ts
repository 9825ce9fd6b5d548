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
//    row, REPETITIONS interleaved repetitions; medians. Each destructive request has its own
//    session; a logout-all its own user holding exactly N.
// 4. The worker's own time: bench/own/ runs the bare worker's and the service's
//    `fetch` in a loop inside workerd, on the no-database paths, with no dev server per call.
// Exits 1 when a request got an unexpected status, or the worker logged anything (it logs
// only 5xx and retried D1 calls), or an operation's rows read grew with the table.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { getPlatformProxy } from "wrangler";
import { migrateLocal, startLocalServer } from "../dev/local-server.ts";
import { wrapD1 } from "../src/db/d1.ts";
import { listEvents } from "../src/db/events.ts";
import { ACTIVITY_WRITE_INTERVAL_MS, type TokenProof } from "../src/db/liveness.ts";
import { sessionEvents, sessions } from "../src/db/schema.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  endSessionByToken,
  listSessionsByToken,
} from "../src/db/sessions.ts";
import { bucketOf, openShards, type Place } from "../src/db/shards.ts";
import { clientContext } from "../src/domain/client-context.ts";
import type { Instant } from "../src/domain/clock.ts";
import { readConfig } from "../src/domain/config.ts";
import { DEFAULT_REGION, hashSecret, type Placement } from "../src/domain/token.ts";
import { buildSession, issueSession } from "../src/services/issue-session.ts";
import { openScope } from "../src/services/scope.ts";
import { GZIP_BUDGET_BYTES, measureBundle } from "../test/checks/bundle-size.ts";
import type { Operation } from "./own/index.ts";

const CONNECTIONS = 10;
const AMOUNT = 200;
/** Requests per row of the warm-up, which is not measured. */
const WARMUP_AMOUNT = 100;
/** The table the costs are measured on again, and the load runs against: at least this many sessions. */
const BIG_TABLE = 200_000;
const REPETITIONS = 3;
const LOAD_SIZES = [5, 50] as const;
/** 1, 10 and 50 for the cost table; 5 and 50 are also the load's sizes, whose rows written it shows. */
const COST_SIZES = [1, 5, 10, 50];
const COST_TABLE_SIZES = [1, 10, 50];
/**
 * Users per operation and size in the cost phase; local D1 reports whole milliseconds, so the
 * mean is reported. Each sample costs ~50 ms of the platform proxy's synchronous calls
 * (every `prepare` and `bind` is one), which is most of this phase's time.
 */
const COST_SAMPLES = 4;
/** Rows per INSERT when seeding (one JSON parameter of ~0.7 MB). */
const ROWS_PER_INSERT = 2000;

const PROJECT = fileURLToPath(new URL("..", import.meta.url));
const BENCHMARKS_MD = join(PROJECT, "BENCHMARKS.md");
const START_MARKER = "<!-- bench:results:start -->";
const END_MARKER = "<!-- bench:results:end -->";
const USER_AGENTS = [
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
];

const args = process.argv.slice(2);
const WRITE = args.includes("--write");
if (args.some((arg) => arg !== "--write")) {
  console.error("usage: npm run bench [-- --write]");
  process.exit(2);
}
const benchStart = performance.now();
const log = (message: string) =>
  console.error(`bench: [${((performance.now() - benchStart) / 1000).toFixed(1)} s] ${message}`);
const fmt = (value: number, digits = 0) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};
const problems: string[] = [];

// ---------------------------------------------------------------------------------------
// Seeding: the rows `issueSession` writes, in bulk.

interface Seeded {
  id: string;
  token: string;
  userId: string;
  /** The User-Agent it was issued with: its requests come from that browser, nothing changed (session context). */
  userAgent: string;
}

let users = 0;
/** Sessions built at once: the SHA-256 of each secret is async, so they overlap. */
const BUILD_CONCURRENCY = 1000;

/** Issues `size` sessions to each of `count` new users; returns each user's sessions. */
async function seedUsers(d1: D1Database, config: ReturnType<typeof readConfig>, count: number, size: number) {
  const userIds = Array.from({ length: count }, (_, u) => `bench-user-${users + u + 1}`);
  // The bench runs the default configuration, one database: every user is placed on it.
  // One placement per user, not per session (200,000 digests made seeding seconds slower).
  const placements = await Promise.all(
    userIds.map(async (userId) => ({ region: DEFAULT_REGION, bucket: await bucketOf(userId) })),
  );
  const inputs = Array.from({ length: count * size }, (_, i) => ({
    userId: userIds[Math.floor(i / size)] as string,
    ipAddress: `198.51.100.${(i % 250) + 1}`,
    userAgent: USER_AGENTS[i % USER_AGENTS.length] as string,
    country: "DE",
    city: "Berlin",
    // A browser's session, as a login worker issues it: its cookie is judged by its context.
    carrier: "cookie" as const,
  }));
  users += count;
  const built: Awaited<ReturnType<typeof buildSession>>[] = [];
  for (let i = 0; i < inputs.length; i += BUILD_CONCURRENCY) {
    built.push(
      ...(await Promise.all(
        inputs
          .slice(i, i + BUILD_CONCURRENCY)
          .map((input, j) => buildSession(config, input, placements[Math.floor((i + j) / size)] as Placement)),
      )),
    );
  }
  await insertInBulk(
    d1,
    built.map((session) => session.row),
  );
  return Array.from({ length: count }, (_, u) =>
    built
      .slice(u * size, (u + 1) * size)
      .map(({ row, issued }) => ({ id: issued.id, token: issued.token, userId: row.userId, userAgent: row.userAgent })),
  );
}

/**
 * Inserts the sessions and their `created` events (what insertSession writes for a session
 * issued over RPC) a few thousand rows per statement: the rows travel as one JSON parameter
 * and SQLite's json_each unpacks them, ~40x faster here than drizzle's multi-row INSERTs,
 * which D1's limit of 100 bound parameters keeps to 7 sessions each.
 */
async function insertInBulk(d1: D1Database, rows: (typeof sessions.$inferInsert)[]): Promise<void> {
  const events = rows.map((row) => ({
    userId: row.userId,
    type: "created" as const,
    sessionId: row.id,
    actorSessionId: null,
    ipAddress: row.ipAddress ?? null,
    createdAt: row.createdAt,
    requestId: crypto.randomUUID(),
    deviceKey: row.deviceKey,
  }));
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    await d1.batch([
      jsonInsert(d1, sessions, rows.slice(i, i + ROWS_PER_INSERT)),
      jsonInsert(d1, sessionEvents, events.slice(i, i + ROWS_PER_INSERT)),
    ]);
  }
}

/** `INSERT INTO <table> (<columns of the rows>) SELECT ... FROM json_each(?)`, columns and encodings from the schema. */
function jsonInsert(d1: D1Database, table: SQLiteTable, rows: Record<string, unknown>[]): D1PreparedStatement {
  const columns = Object.entries(getTableColumns(table)).filter(([key]) => key in (rows[0] ?? {}));
  const names = columns.map(([, column]) => `"${column.name}"`).join(", ");
  const values = columns.map((_, i) => `value->>${i}`).join(", ");
  const data = rows.map((row) =>
    columns.map(([key, column]) => (row[key] == null ? null : column.mapToDriverValue(row[key]))),
  );
  return d1
    .prepare(`INSERT INTO "${getTableName(table)}" (${names}) SELECT ${values} FROM json_each(?)`)
    .bind(JSON.stringify(data));
}

// ---------------------------------------------------------------------------------------
// Cost: D1's own meta, summed over the statements of one round trip.

interface Meta {
  rowsRead: number;
  rowsWritten: number;
  duration: number;
  statements: number;
  /** Some statement changed the database (D1's `changed_db`). */
  changedDb: boolean;
}

/**
 * A D1 binding that adds up the meta of every result that passes through it, and keeps each
 * round trip's answer (for the own-time loop, which replays them: bench/own/).
 */
function meteredD1(d1: D1Database) {
  const total: Meta = { rowsRead: 0, rowsWritten: 0, duration: 0, statements: 0, changedDb: false };
  const answers: unknown[] = [];
  const add = (result: unknown) => {
    const meta = (result as { meta?: D1Meta } | null)?.meta;
    if (!meta) return;
    total.rowsRead += meta.rows_read;
    total.rowsWritten += meta.rows_written;
    total.duration += meta.duration;
    total.statements++;
    total.changedDb ||= meta.changed_db;
  };
  const db = wrapD1(d1, async (call) => {
    const result = await call();
    answers.push(result);
    for (const item of Array.isArray(result) ? result : [result]) add(item);
    return result;
  });
  return { db, total, answers };
}

type CostKey =
  | "create"
  | "authenticate"
  | "list"
  | "listTouch"
  | "events"
  | "revoke"
  | "logout"
  | "logoutAll"
  | "logoutOthers";
const COST_LABELS: Record<CostKey, string> = {
  create: "`SessionService.create` (issue one more)",
  authenticate: "`SessionService.authenticate`",
  list: "`GET /auth/sessions`",
  listTouch: "`GET /auth/sessions`, activity due (> 5 min)",
  events: "`GET /auth/events`",
  revoke: "`DELETE /auth/sessions/:id` (another session)",
  logout: "`POST /auth/logout`",
  logoutAll: "`DELETE /auth/logout`",
  logoutOthers: "`DELETE /auth/logout?scope=others`",
};

async function proofOf(token: string): Promise<TokenProof> {
  const [id, secret] = token.split(".") as [string, string];
  return { id, secretHash: await hashSecret(secret), carrier: "cookie" };
}

/** The request (or RPC call) that runs `key` for the user holding `own`, as a client sends it. */
function operationOf(key: CostKey, own: Seeded[], answers: unknown[]): Operation {
  const caller = own[0] as Seeded;
  const http = (method: string, path: string): Operation => ({
    kind: "http",
    method,
    path,
    headers: browser(caller),
    batches: answers,
  });
  switch (key) {
    case "create":
      return {
        kind: "rpc",
        method: "create",
        arg: { userId: caller.userId, ipAddress: "203.0.113.7" },
        batches: answers,
      };
    case "authenticate":
      return {
        kind: "rpc",
        method: "authenticate",
        arg: caller.token,
        options: { carrier: "cookie", context: { userAgent: caller.userAgent } },
        batches: answers,
      };
    case "list":
    case "listTouch":
      return http("GET", "/auth/sessions");
    case "events":
      return http("GET", "/auth/events");
    case "revoke":
      return http("DELETE", `/auth/sessions/${(own[1] ?? caller).id}`);
    case "logout":
      return http("POST", "/auth/logout");
    case "logoutAll":
      return http("DELETE", "/auth/logout");
    case "logoutOthers":
      return http("DELETE", "/auth/logout?scope=others");
  }
}

/**
 * Runs one operation for a user holding `own` sessions, as its route does, on a metered
 * binding; with what a client sends to run it, and the database's answers.
 */
async function runOperation(
  env: Env,
  config: ReturnType<typeof readConfig>,
  key: CostKey,
  own: Seeded[],
): Promise<Meta & { operation: Operation }> {
  const { db: metered, total, answers } = meteredD1(env.DB);
  const caller = own[0] as Seeded;
  // The caller's bucket on the metered database, as the routes get it from the token.
  const db = openShards({ ...env, DB: metered }).forSession(caller.id) as Place;
  const proof = await proofOf(caller.token);
  const now = new Date();
  const at = (offsetMs: number): Instant => {
    const moved = new Date(now.getTime() + offsetMs);
    return {
      now: moved,
      idleCutoff: new Date(moved.getTime() - config.idleTimeoutSeconds * 1000),
      slidingMaxLifetimeMs: null,
      stepUpCutoff: null,
    };
  };
  const actor = { sessionId: caller.id, ipAddress: "203.0.113.7", queued: false };
  // Judged as every request of a browser's session is: from its own browser, nothing changed.
  const check = { context: clientContext(caller.userAgent, null, null), policies: config.context };
  switch (key) {
    case "create": {
      // One more session for this user, who holds `own.length`: what a login costs them.
      await issueSession(
        { ...openScope({ ...env, DB: metered }), config, outbox: null },
        {
          userId: caller.userId,
          ipAddress: "203.0.113.7",
        },
      );
      break;
    }
    case "authenticate":
      await authenticate(db, proof, at(0), check, actor);
      break;
    case "list":
      await listSessionsByToken(db, proof, at(0), check, actor);
      break;
    case "listTouch":
      await listSessionsByToken(db, proof, at(ACTIVITY_WRITE_INTERVAL_MS + 1000), check, actor);
      break;
    case "events":
      await listEvents(db, proof, at(0), check, actor);
      break;
    case "revoke":
      await deleteSession(db, proof, (own[1] ?? caller).id, actor, at(0), check);
      break;
    case "logout":
      await endSessionByToken(db, proof, actor, at(0));
      break;
    case "logoutAll":
      await endAllSessionsByToken(db, proof, actor, at(0), check);
      break;
    case "logoutOthers":
      await endOtherSessionsByToken(db, proof, actor, at(0), check);
      break;
  }
  return { ...total, operation: operationOf(key, own, answers) };
}

interface Cost {
  key: CostKey;
  n: number;
  statements: number;
  rowsRead: number;
  rowsWritten: number;
  /** Mean over COST_SAMPLES users of D1's summed `duration`, ms. */
  duration: number;
  changedDb: boolean;
  /** One sample's request and recorded answers, for the own-time loop. */
  operation: Operation;
}

async function measureCosts(env: Env, config: ReturnType<typeof readConfig>): Promise<Cost[]> {
  const costs: Cost[] = [];
  for (const n of COST_SIZES) {
    for (const key of Object.keys(COST_LABELS) as CostKey[]) {
      // Each sample on its own user, all at once: D1's meta is per statement, unmoved by the
      // others, and the platform proxy's latency overlaps instead of adding up.
      const seeded = await seedUsers(env.DB, config, COST_SAMPLES, n);
      const samples = await Promise.all(seeded.map((own) => runOperation(env, config, key, own)));
      const first = samples[0] as (typeof samples)[number];
      const rowsRead = Math.max(...samples.map((s) => s.rowsRead));
      const rowsWritten = Math.max(...samples.map((s) => s.rowsWritten));
      // A range scan reads one index entry past the user's range unless the user is the last
      // in the index: up to one row per statement apart between users, nothing more.
      if (samples.some((s) => rowsRead - s.rowsRead > s.statements || rowsWritten !== s.rowsWritten)) {
        const seen = samples.map((s) => `${s.rowsRead}/${s.rowsWritten}`).join(", ");
        problems.push(`${key} at ${n}: rows read/written differ between users of the same size: ${seen}`);
      }
      costs.push({
        key,
        n,
        statements: first.statements,
        rowsRead,
        rowsWritten,
        duration: samples.reduce((sum, s) => sum + s.duration, 0) / samples.length,
        changedDb: samples.some((s) => s.changedDb),
        operation: first.operation,
      });
    }
  }
  return costs;
}

// ---------------------------------------------------------------------------------------
// Load. autocannon has no type declarations; this is the part of its API used here.

interface CannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  setupRequest?: (request: CannonRequest) => CannonRequest;
}
interface CannonResult {
  errors: number;
  timeouts: number;
  statusCodeStats: Record<string, { count: number }>;
  latency: { p50: number; p99: number };
}
interface CannonInstance {
  on(event: "response", listener: () => void): void;
}
type Autocannon = (
  options: Record<string, unknown>,
  done: (error: Error | null, result: CannonResult) => void,
) => CannonInstance;
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

interface Row {
  label: string;
  n: number | null;
  server: "bare" | "service";
  status: number;
  /**
   * The no-database row it is a share of besides the bare worker ("own": the bare `GET /` for
   * `GET /d1`; "ceiling": the service's /auth/ 404 for an operation). The ceiling row is that 404.
   */
  against?: "own" | "ceiling";
  isCeiling?: true;
  /** It ends sessions: each repetition has exactly AMOUNT of its requests, none to spare for a warm-up. */
  destructive?: true;
  /** The operation it runs, whose rows written (at `n`) the table shows. */
  cost?: CostKey;
  /** One request each: distinct tokens for the destructive operations. */
  requests: () => CannonRequest[];
}

interface Run {
  rps: number;
  p50: number;
  p99: number;
}

/** Fires exactly `amount` requests and times them from the first to the last response. */
function fire(base: URL, row: Row, amount = AMOUNT): Promise<Run> {
  const list = row.requests();
  let next = 0;
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let last = started;
    const instance = autocannon(
      {
        url: base.origin,
        connections: CONNECTIONS,
        pipelining: 1,
        timeout: 30,
        sampleInt: 100,
        amount,
        requests: [{ setupRequest: (request: CannonRequest) => ({ ...request, ...list[next++ % list.length] }) }],
      },
      (error, result) => {
        if (error) return reject(error);
        const statuses = Object.entries(result.statusCodeStats);
        const answered = statuses.reduce((sum, [, s]) => sum + s.count, 0);
        const wrong = statuses.filter(([status]) => Number(status) !== row.status);
        if (wrong.length > 0 || result.errors > 0 || answered !== amount) {
          problems.push(
            `${row.label} (${row.n ?? "-"}): ${answered}/${amount} answered, statuses ${JSON.stringify(result.statusCodeStats)}, ${result.errors} errors`,
          );
        }
        resolve({ rps: answered / ((last - started) / 1000), p50: result.latency.p50, p99: result.latency.p99 });
      },
    );
    instance.on("response", () => (last = performance.now()));
  });
}

/** A request of the browser that holds the session: its cookie and User-Agent. */
const browser = ({ token, userAgent }: Seeded) => ({ cookie: `__Host-session=${token}`, "user-agent": userAgent });

async function loadRows(d1: D1Database, config: ReturnType<typeof readConfig>): Promise<Row[]> {
  const rows: Row[] = [
    {
      label: "bare Hono worker `GET /`",
      n: null,
      server: "bare",
      status: 200,
      requests: () => [{ method: "GET", path: "/" }],
    },
    {
      label: "bare Hono worker `GET /d1`: one D1 round trip, `SELECT 1`",
      n: null,
      server: "bare",
      against: "own",
      status: 200,
      requests: () => [{ method: "GET", path: "/d1" }],
    },
    {
      label: "service, no database: `GET /nowhere` (404, request log included)",
      n: null,
      server: "service",
      status: 404,
      requests: () => [{ method: "GET", path: "/nowhere" }],
    },
    {
      label: "service, no database: `GET /auth/nowhere` (404 on the operations' way in: context read)",
      n: null,
      server: "service",
      isCeiling: true,
      status: 404,
      requests: () => [{ method: "GET", path: "/auth/nowhere" }],
    },
  ];
  for (const n of LOAD_SIZES) {
    const [reader] = (await seedUsers(d1, config, 1, n)) as [Seeded[]];
    rows.push({
      label: "`GET /auth/sessions`",
      n,
      server: "service",
      against: "ceiling",
      cost: "list",
      status: 200,
      requests: () => [{ method: "GET", path: "/auth/sessions", headers: browser(reader[0] as Seeded) }],
    });
    // One user per request and repetition, each holding exactly n sessions when asked, except
    // that a delete or a logout at 50 shares a user with 9 more: it holds 50 down to 41.
    const perUser = Math.max(1, n / 5);
    const destructive: [string, CostKey, number, (own: Seeded[], k: number) => CannonRequest][] = [
      [
        "`DELETE /auth/sessions/:id` (another session)",
        "revoke",
        perUser,
        (own, k) => ({ method: "DELETE", path: `/auth/sessions/${own[k + 1]!.id}`, headers: browser(own[0]!) }),
      ],
      [
        "`POST /auth/logout`",
        "logout",
        perUser,
        (own, k) => ({ method: "POST", path: "/auth/logout", headers: browser(own[k]!) }),
      ],
      [
        "`DELETE /auth/logout`",
        "logoutAll",
        1,
        (own) => ({ method: "DELETE", path: "/auth/logout", headers: browser(own[0]!) }),
      ],
    ];
    for (const [label, cost, k, request] of destructive) {
      const perRepetition: CannonRequest[][] = [];
      for (let r = 0; r < REPETITIONS; r++) {
        const seeded = await seedUsers(d1, config, AMOUNT / k, n);
        perRepetition.push(seeded.flatMap((own) => Array.from({ length: k }, (_, j) => request(own, j))));
      }
      rows.push({
        label,
        n,
        server: "service",
        against: "ceiling",
        cost,
        destructive: true,
        status: 200,
        requests: () => perRepetition.shift() ?? [],
      });
    }
  }
  // The bare worker again at the end: each repetition's baseline is the mean of the two, so
  // a machine that speeds up or slows down during a repetition is not charged to the rows.
  rows.push({ ...(rows[0] as Row), label: "bare Hono worker `GET /`, again at the end of each repetition" });
  return rows;
}

// ---------------------------------------------------------------------------------------
// The worker's own time per request: bench/own/ calls `fetch` of the bare worker or
// of the service's app OWN_LOOP times inside workerd, for one request of the client's, which
// times it. No dev server, proxy or HTTP per call: the CPU time a request of the worker costs,
// which is what production bills, against what the harness costs around it.

const OWN_LOOP = 3_000;
const OWN_REPETITIONS = 7;
const OWN_ROWS = [
  { label: "bare Hono worker `GET /`", target: "bare", path: "/", status: 200 },
  { label: "service `GET /nowhere` (404)", target: "service", path: "/nowhere", status: 404 },
  { label: "service `GET /auth/nowhere` (404, context read)", target: "service", path: "/auth/nowhere", status: 404 },
  {
    label: "service `GET /auth/sessions` without a credential (401)",
    target: "service",
    path: "/auth/sessions",
    status: 401,
  },
] as const;

interface OwnTime {
  label: string;
  micros: number;
  ratio: number;
}

/** Loop length and repetitions for an operation with a database (each ~10 times a 404's work). */
const OWN_OPERATION_LOOP = 300;
const OWN_OPERATION_REPETITIONS = 3;

/**
 * The worker's CPU per operation, µs by `${key} ${n}`: the operation's request (or RPC call)
 * in the own-time loop, its D1 answers replayed from the cost phase (bench/own/).
 */
async function operationTimes(base: URL, costs: Cost[]): Promise<Map<string, number>> {
  const once = async (cost: Cost) => {
    const started = performance.now();
    const response = await fetch(new URL(`/?n=${OWN_OPERATION_LOOP}`, base), {
      method: "POST",
      body: JSON.stringify(cost.operation),
    });
    const statuses = await response.text();
    if (statuses !== "[200]")
      problems.push(`own time of ${cost.key} at ${cost.n}: statuses ${statuses}, expected [200]`);
    return ((performance.now() - started) * 1000) / OWN_OPERATION_LOOP;
  };
  const times = new Map<string, number>();
  for (let r = 0; r < OWN_OPERATION_REPETITIONS; r++) {
    for (const cost of costs) {
      const micros = await once(cost);
      const key = `${cost.key} ${cost.n}`;
      times.set(key, Math.min(micros, times.get(key) ?? Number.POSITIVE_INFINITY));
    }
  }
  return times;
}

async function ownTimes(base: URL): Promise<OwnTime[]> {
  const once = async (row: (typeof OWN_ROWS)[number]) => {
    const url = new URL(`/?target=${row.target}&path=${encodeURIComponent(row.path)}&n=${OWN_LOOP}`, base);
    const started = performance.now();
    const response = await fetch(url);
    const statuses = await response.text();
    if (statuses !== `[${row.status}]`)
      problems.push(`own time of ${row.path}: statuses ${statuses}, expected [${row.status}]`);
    return ((performance.now() - started) * 1000) / OWN_LOOP;
  };
  for (const row of OWN_ROWS) await once(row);
  const runs: number[][] = [];
  for (let r = 0; r < OWN_REPETITIONS; r++) {
    const rep: number[] = [];
    for (const row of OWN_ROWS) rep.push(await once(row));
    runs.push(rep);
  }
  // The fastest repetition: the loop has no I/O, so whatever else the machine does can only add
  // time to it, and the least time is the closest to the code's own.
  const fastest = (i: number) => Math.min(...runs.map((rep) => rep[i] as number));
  return OWN_ROWS.map((row, i) => ({ label: row.label, micros: fastest(i), ratio: fastest(0) / fastest(i) }));
}

function ownTable(times: OwnTime[]): string {
  return [
    "| Path | µs per request (fastest repetition) | Ratio to bare (requests per second of one core) |",
    "|---|--:|--:|",
    ...times.map((t) => `| ${t.label} | ${fmt(t.micros, 1)} | ${fmt(t.ratio, 2)} |`),
  ].join("\n");
}

// ---------------------------------------------------------------------------------------
// Report.

function versions(): string {
  const version = (name: string) => {
    try {
      const require = createRequire(join(PROJECT, "node_modules", name, "package.json"));
      return (require(join(PROJECT, "node_modules", name, "package.json")) as { version: string }).version;
    } catch {
      return "?";
    }
  };
  return ["wrangler", "hono", "drizzle-orm", "autocannon"].map((name) => `${name} ${version(name)}`).join(", ");
}

/**
 * Cloudflare's prices (Workers Paid, beyond the included amounts), as listed on 2026-11-25:
 * $ per million of each. D1 counts every index entry an insert or update touches as a row written.
 */
export const PRICES = { rowWritten: 1.0, rowRead: 0.001, request: 0.3, cpuMs: 0.02 } as const;

/** Dollars per million operations: its rows, one request, its CPU. */
function dollarsPerMillion(cost: Cost, cpuMicros: number): number {
  return (
    cost.rowsWritten * PRICES.rowWritten +
    cost.rowsRead * PRICES.rowRead +
    PRICES.request +
    (cpuMicros / 1000) * PRICES.cpuMs
  );
}

function costTable(small: Cost[], large: Cost[], tableRows: number, cpu: Map<string, number>): string {
  const lines = [
    `| Operation | Sessions of the user | Statements | Rows read | Rows written | Worker CPU (µs) | $ per million | Changes the database | Rows read / written, table of ${fmt(tableRows)} | D1 duration (ms, mean) | One database sustains (op/s) |`,
    "|---|--:|--:|--:|--:|--:|--:|:-:|--:|--:|--:|",
  ];
  for (const cost of small.filter((c) => COST_TABLE_SIZES.includes(c.n))) {
    const big = large.find((c) => c.key === cost.key && c.n === cost.n) as Cost;
    // On the big table: the figure that production, with its many users, would see.
    const duration = big.duration;
    const micros = cpu.get(`${cost.key} ${cost.n}`) ?? Number.NaN;
    lines.push(
      `| ${COST_LABELS[cost.key]} | ${cost.n} | ${cost.statements} | ${cost.rowsRead} | ${cost.rowsWritten} | ${fmt(micros)} | ${fmt(dollarsPerMillion(big, micros), 2)} | ${cost.changedDb ? "yes" : "no"} | ${big.rowsRead} / ${big.rowsWritten} | ${fmt(duration, 2)} | ${duration > 0 ? fmt(1000 / duration) : "> 10,000"} |`,
    );
  }
  return lines.join("\n");
}

function loadTable(rows: Row[], runs: Run[][], costs: Cost[]): string {
  const lines = [
    "| Row | Sessions per user | Req/s (median) | p50 / p99 (ms) | Ratio to bare | Share of its own no-database ceiling | Share of the bare worker's `GET /d1` | Rows written |",
    "|---|--:|--:|--:|--:|--:|--:|--:|",
  ];
  // The D1 floor on this harness: a bare worker's one round trip that reads no table.
  const floor = rows.findIndex((row) => row.against === "own");
  // The operations' no-database ceiling is the 404 that takes their way in (/auth/, the
  // context read); the bare worker's `GET /d1` is shown against its own, `GET /`.
  const ceiling = rows.findIndex((row) => row.isCeiling);
  const ratio = (i: number, to: (rep: Run[]) => number) => median(runs.map((rep) => (rep[i] as Run).rps / to(rep)));
  const bareOf = (rep: Run[]) => ((rep[0] as Run).rps + (rep[rep.length - 1] as Run).rps) / 2;
  const rpsOf = (j: number) => (rep: Run[]) => (rep[j] as Run).rps;
  rows.forEach((row, i) => {
    const own = runs.map((rep) => rep[i] as Run);
    const share =
      row.against === "ceiling"
        ? fmt(ratio(i, rpsOf(ceiling)), 2)
        : row.against === "own"
          ? fmt(ratio(i, bareOf), 2)
          : row.isCeiling
            ? "1.00"
            : "–";
    const toFloor = row.cost ? fmt(ratio(i, rpsOf(floor)), 2) : "–";
    const written = row.cost ? String(costs.find((c) => c.key === row.cost && c.n === row.n)?.rowsWritten ?? "?") : "–";
    lines.push(
      `| ${row.label} | ${row.n ?? "–"} | ${fmt(median(own.map((r) => r.rps)))} | ${fmt(median(own.map((r) => r.p50)))} / ${fmt(median(own.map((r) => r.p99)))} | ${fmt(ratio(i, bareOf), 2)} | ${share} | ${toFloor} | ${written} |`,
    );
  });
  return lines.join("\n");
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
      rows = await loadRows(proxy.env.DB, config);
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
    const logged: string[] = [];
    const bareConfig = join(PROJECT, "bench", "bare", "wrangler.toml");
    const ownConfig = join(PROJECT, "bench", "own", "wrangler.toml");
    const [service, bare, ownLoop] = await Promise.all([
      startLocalServer({
        migrate: false,
        persistTo: state,
        onLog: (level, message) => logged.push(`${level}: ${message}`),
      }),
      startLocalServer({ config: bareConfig, migrate: false, persistTo: state }),
      startLocalServer({ config: ownConfig, migrate: false, persistTo: state }),
    ]);
    const urls = { bare: bare.url, service: service.url };
    let own: OwnTime[] = [];
    let cpu = new Map<string, number>();
    const runs: Run[][] = [];
    const loadStartTime = performance.now();
    try {
      await checkServed(service.url);
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
      cpu = await operationTimes(
        ownLoop.url,
        costs.large.filter((c) => COST_TABLE_SIZES.includes(c.n)),
      );
    } finally {
      await Promise.all([service.stop(), bare.stop(), ownLoop.stop()]);
    }
    const loadSeconds = (performance.now() - loadStartTime) / 1000;
    if (logged.length > 0) problems.push(`the worker logged ${logged.length} line(s), e.g. ${logged[0]}`);

    const totalSeconds = (performance.now() - wall) / 1000;
    const loadEnd = loadavg();
    const command = `npm run bench${args.length > 0 ? ` -- ${args.join(" ")}` : ""}`;
    const markdown = [
      `Run ${startedAt.toISOString().replace(/\.\d+Z$/, "Z")} with \`${command}\`: ${fmt(totalSeconds)} s in all ` +
        `(cost and seeding ${fmt(seedSeconds)} s, load ${fmt(loadSeconds)} s). ${cpus().length} cores; ` +
        `load average (1/5/15 min) ${loadStart.map((l) => l.toFixed(2)).join(" / ")} at the start, ` +
        `${loadEnd.map((l) => l.toFixed(2)).join(" / ")} at the end. Node ${process.version}, ${versions()}.`,
      "",
      `**Throughput** (autocannon, ${CONNECTIONS} connections, ${AMOUNT} requests per row, ${REPETITIONS} interleaved repetitions, medians; ` +
        "each ratio is the median of the repetitions' own ratios, to the mean of the bare worker's first and last row there):",
      "",
      loadTable(rows, runs, costs.large),
      "",
      `**The worker's own time per request** (its \`fetch\` called ${fmt(OWN_LOOP)} times in a loop inside workerd by one request, ` +
        `no dev server and no database; ${OWN_REPETITIONS} interleaved repetitions, the fastest of each row; the ratio is the bare worker's time over the row's):`,
      "",
      ownTable(own),
      "",
      "**Cost per operation** (D1's `meta` summed over the operation's one round trip; the worker's CPU: " +
        `the operation in the own-time loop, ${fmt(OWN_OPERATION_LOOP)} times, its D1 answers replayed, the fastest of ${OWN_OPERATION_REPETITIONS} repetitions; ` +
        `dollars per million operations at $${PRICES.rowWritten.toFixed(2)} per million rows written, $${PRICES.rowRead} per million rows read, ` +
        `$${PRICES.request.toFixed(2)} per million requests and $${PRICES.cpuMs.toFixed(2)} per million CPU-ms, Cloudflare's prices on 2026-11-25, ` +
        "on the table of the fourth column before last):",
      "",
      costTable(costs.small, costs.large, costs.tableRows, cpu),
      "",
      `**Bundle** (\`npm run size\`): ${fmt(bundle.minifiedBytes)} B minified, ${fmt(bundle.gzipBytes)} B gzip -9 ` +
        `(budget ${fmt(GZIP_BUDGET_BYTES)} B${bundle.gzipBytes > GZIP_BUDGET_BYTES ? ", EXCEEDED" : ""}).`,
      ...(problems.length > 0 ? ["", "Problems:", ...problems.map((p) => `- ${p}`)] : []),
    ].join("\n");
    console.log(markdown);
    if (WRITE && problems.length === 0) {
      const current = readFileSync(BENCHMARKS_MD, "utf8");
      const start = current.indexOf(START_MARKER);
      const end = current.indexOf(END_MARKER);
      if (start < 0 || end < start)
        throw new Error(`BENCHMARKS.md lacks the ${START_MARKER} ... ${END_MARKER} markers`);
      writeFileSync(
        BENCHMARKS_MD,
        `${current.slice(0, start + START_MARKER.length)}\n${markdown}\n${current.slice(end)}`,
      );
      log("updated BENCHMARKS.md");
    } else if (WRITE) {
      log("not updating BENCHMARKS.md: this run had problems");
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
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
