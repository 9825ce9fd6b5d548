// Load benchmark of the four operations against `wrangler dev` on loopback, with users
// holding 1, 10 and 100 sessions. Prints a Markdown table to stdout (progress goes to
// stderr); `--write` also puts the results into BENCHMARKS.md between its markers (only
// when the run had no problem).
//   npm run bench                 # measure and print
//   npm run bench -- --write      # ...and update BENCHMARKS.md
//
// What it does, in order (see BENCHMARKS.md for the method and what it does not measure):
//  1. measures the bundle (scripts/bundle-size.ts);
//  2. applies the migrations to a fresh local D1 in a temp dir (--persist-to);
//  3. seeds every session it will need through `issueSession`, the code path of
//     `npm run session:create`, on a getPlatformProxy D1 persisted in that same dir. This
//     runs in a child process of this same script (`--seed-child`, in its own process
//     group like every other command), so that wrangler's exit and signal hooks never load
//     into this process and the proxy's workerd can be stopped by its group id;
//  4. starts `wrangler dev` on a free loopback port over that dir, checks that it sees the
//     seeded rows, warms up, then drives each operation with autocannon (fixed
//     connections, a fixed amount of requests; each destructive request uses its own
//     seeded session or user), reading each request's D1 round trips from the worker's
//     JSON log lines in wrangler's output;
//  5. stops every process group it started, by id, and removes the temp dir: on success,
//     on failure and on SIGINT/SIGTERM/SIGHUP.
// Exits 1 when any measured request did not answer 200, when the log lines do not match
// the requests, or when logout-all of 100 sessions takes more round trips than of 1.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { cpus, loadavg, release, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { readConfig } from "../src/config.ts";
import { openShards } from "../src/db/shards.ts";
import { issueSession } from "../src/issue-session.ts";
import { type BundleSize, GZIP_BUDGET_BYTES, measureBundle } from "./bundle-size.ts";

// ---------------------------------------------------------------------------------------
// Parameters. Seeding through the platform proxy costs ~10-25 ms per session on this
// 2-core machine, so the destructive runs are sized in requests, not seconds.

const CONNECTIONS = 4;
const SESSION_COUNTS = [1, 10, 100] as const;
type SessionCount = (typeof SESSION_COUNTS)[number];
/** Requests per run of GET /auth/sessions (all with the one token of a user holding N sessions). */
const LIST_AMOUNT = 600;
/** Requests per run of DELETE /auth/sessions/:id and POST /auth/logout (each ends one session). */
const ENDING_ONE_AMOUNT = 300;
/** Requests per run of DELETE /auth/logout: each ends a distinct user's N sessions. */
const LOGOUT_ALL_AMOUNT: Record<SessionCount, number> = { 1: 300, 10: 50, 100: 20 };
const SEED_CONCURRENCY = 8;
const REQUEST_TIMEOUT_S = 30;
const SERVER_START_TIMEOUT_MS = 90_000;

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
const SEED_CHILD = args[0] === "--seed-child";
const WRITE = args.includes("--write");
if (!SEED_CHILD && args.some((arg) => arg !== "--write")) {
  console.error("usage: npm run bench [-- --write]");
  process.exit(2);
}

const log = (message: string) => console.error(`bench: ${message}`);

// ---------------------------------------------------------------------------------------
// autocannon has no type declarations; this is the part of its API used here.

interface CannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  setupRequest?: (request: CannonRequest) => CannonRequest;
}
interface CannonOptions {
  url: string;
  connections: number;
  pipelining: number;
  timeout: number;
  /** How often autocannon samples, in ms; a run only ends on a sample tick. */
  sampleInt: number;
  amount: number;
  method?: string;
  headers?: Record<string, string>;
  requests?: CannonRequest[];
}
interface CannonResult {
  start: Date;
  finish: Date;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
  latency: { p50: number; p99: number; max: number; totalCount: number };
  requests: { total: number; sent: number };
}
interface CannonInstance {
  on(event: "response", listener: () => void): void;
}
type Autocannon = (options: CannonOptions, done: (error: Error | null, result: CannonResult) => void) => CannonInstance;
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

/**
 * Runs autocannon and times it from the start to the last response: its own start/finish
 * are rounded to its sample ticks, which skews the rate of a run lasting a second or two.
 */
function cannon(options: CannonOptions): Promise<CannonResult & { seconds: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let lastResponse = started;
    const instance = autocannon(options, (error, result) =>
      error ? reject(error) : resolve({ ...result, seconds: (lastResponse - started) / 1000 }),
    );
    instance.on("response", () => (lastResponse = performance.now()));
  });
}

// ---------------------------------------------------------------------------------------
// Processes: each command runs in its own process group (detached), remembered by its id
// until the whole group is gone.

const groups = new Map<number, string>();
let stateDir: string | undefined;
/** Set once cleanup starts, so that seeding stops issuing sessions. */
let stopping = false;

function startGroup(name: string, command: string, argv: string[], onLine: (line: string) => void): ChildProcess {
  if (stopping) throw new Error(`not starting ${name}: the bench is stopping`);
  const child = spawn(command, argv, {
    cwd: PROJECT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, FORCE_COLOR: "0", NO_COLOR: "1", WRANGLER_SEND_METRICS: "false" },
  });
  if (child.pid === undefined) throw new Error(`could not start ${name}`);
  groups.set(child.pid, name);
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream, crlfDelay: Infinity }).on("line", onLine);
  }
  return child;
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitGone(pgid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

/** SIGTERM to the group, SIGKILL after 5 s; forgets the group once none of it is left. */
async function stopGroup(pgid: number): Promise<void> {
  const name = groups.get(pgid) ?? String(pgid);
  if (groupAlive(pgid)) {
    try {
      process.kill(-pgid, "SIGTERM");
    } catch {}
    if (!(await waitGone(pgid, 5_000))) {
      log(`${name} (process group ${pgid}) ignored SIGTERM; sending SIGKILL`);
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {}
      if (!(await waitGone(pgid, 3_000))) log(`process group ${pgid} (${name}) is still there`);
    }
  }
  groups.delete(pgid);
}

/** A workerd that is shutting down may still flush its SQLite files: retry until the dir stays gone. */
async function removeDir(dir: string): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {}
    await sleep(250);
    if (!existsSync(dir)) return;
  }
  log(`could not remove ${dir}`);
}

let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    stopping = true;
    for (const pgid of [...groups.keys()]) await stopGroup(pgid);
    if (stateDir) await removeDir(stateDir);
  })();
  return cleaning;
}

function installExitHandlers(): void {
  // Last resort when the process exits without having cleaned up (synchronous: SIGKILL).
  process.on("exit", () => {
    for (const pgid of groups.keys()) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {}
    }
  });
  const signals = [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ] as const;
  for (const [signal, code] of signals) {
    process.on(signal, () => {
      if (cleaning) return;
      log(`${signal}: stopping everything this bench started`);
      void cleanup().finally(() => process.exit(code));
    });
  }
}

/** Runs a command in its own process group; lines starting with "bench:" are passed on. */
function run(name: string, command: string, argv: string[]): Promise<void> {
  const output: string[] = [];
  const child = startGroup(name, command, argv, (line) => {
    if (line.startsWith("bench:")) console.error(line);
    else output.push(line);
  });
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      void stopGroup(child.pid as number).then(() => {
        if (code === 0) resolve();
        else reject(new Error(`${name} failed (${signal ?? `exit ${code}`}):\n${output.slice(-30).join("\n")}`));
      });
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

// ---------------------------------------------------------------------------------------
// The dev server and its request log.

interface RequestLine {
  method: string;
  route: string | null;
  status: number;
  duration_ms: number;
  d1_round_trips: number;
}

class DevServer {
  readonly lines: RequestLine[] = [];
  readonly tail: string[] = [];
  /** Lines from wrangler about rebuilding the worker after the server was up (src/ changed). */
  readonly reloads: string[] = [];
  base = "";
  private child: ChildProcess | undefined;

  async start(persistTo: string): Promise<void> {
    const port = await freePort();
    const inspectorPort = await freePort();
    this.base = `http://127.0.0.1:${port}`;
    let started = false;
    this.child = startGroup(
      "wrangler dev",
      "npx",
      [
        "wrangler",
        "dev",
        "--ip",
        "127.0.0.1",
        "--port",
        String(port),
        "--inspector-port",
        String(inspectorPort),
        "--persist-to",
        persistTo,
      ],
      (line) => {
        const json = line.indexOf('{"level"');
        if (json >= 0 && line.includes('"event":"request"')) {
          try {
            this.lines.push(JSON.parse(line.slice(json)) as RequestLine);
            return;
          } catch {}
        }
        if (started && /reload/i.test(line)) this.reloads.push(line.trim());
        this.tail.push(line);
        if (this.tail.length > 60) this.tail.shift();
      },
    );
    let exited = false;
    this.child.on("close", () => (exited = true));
    const deadline = Date.now() + SERVER_START_TIMEOUT_MS;
    for (;;) {
      if (exited) throw new Error(`wrangler dev exited during startup:\n${this.tail.join("\n")}`);
      if (Date.now() > deadline)
        throw new Error(
          `wrangler dev did not answer within ${SERVER_START_TIMEOUT_MS / 1000} s:\n${this.tail.join("\n")}`,
        );
      try {
        await fetch(`${this.base}/`, { signal: AbortSignal.timeout(2_000) });
        started = true;
        return;
      } catch {
        await sleep(250);
      }
    }
  }

  async stop(): Promise<void> {
    if (this.child?.pid !== undefined) await stopGroup(this.child.pid);
  }

  /** Waits for `count` request lines after index `from` (they trail the responses slightly). */
  async linesSince(from: number, count: number): Promise<RequestLine[]> {
    const deadline = Date.now() + 10_000;
    while (this.lines.length - from < count && Date.now() < deadline) await sleep(20);
    await sleep(100); // anything extra would show up here and be reported as a mismatch
    return this.lines.slice(from);
  }
}

// ---------------------------------------------------------------------------------------
// Seeding: every session the runs will use, issued through `issueSession`.

interface Seeded {
  id: string;
  token: string;
}
interface SeedUser {
  userId: string;
  sessions: Seeded[];
  size: number;
}

type OperationKey = "list" | "deleteSession" | "logout" | "logoutAll";
const OPERATIONS: Record<OperationKey, { label: string; method: string }> = {
  list: { label: "GET /auth/sessions", method: "GET" },
  deleteSession: { label: "DELETE /auth/sessions/:id", method: "DELETE" },
  logout: { label: "POST /auth/logout", method: "POST" },
  logoutAll: { label: "DELETE /auth/logout", method: "DELETE" },
};

interface Planned {
  op: OperationKey;
  n: SessionCount | 0; // 0: warm-up, not reported
  users: SeedUser[];
  /** Requests to send; default: one per item of the request list. */
  amount?: number;
  /** Builds the request list once the users are seeded. */
  requests: () => { method: string; path: string; token: string }[];
}

let runId = 0;
function makeUsers(label: string, count: number, size: number): SeedUser[] {
  return Array.from({ length: count }, (_, i) => ({ userId: `bench-${runId}-${label}-${i}`, sessions: [], size }));
}

/** How many of a user's N sessions one run ends before moving on: the user holds N down to N/2+1. */
const endedPerUser = (n: number) => (n === 1 ? 1 : n / 2);

function planDeleteSession(n: SessionCount | 0, amount: number): Planned {
  const size = n === 0 ? 9 : n;
  const perUser = n === 0 ? 8 : endedPerUser(n);
  const users = makeUsers(`delete-${n}`, Math.ceil(amount / perUser), size);
  return {
    op: "deleteSession",
    n,
    users,
    requests: () =>
      users.flatMap((user) => {
        const caller = user.sessions[0] as Seeded;
        // With one session the caller deletes its own; otherwise the caller deletes others.
        const targets = size === 1 ? [caller] : user.sessions.slice(1, 1 + perUser);
        return targets.map((target) => ({
          method: "DELETE",
          path: `/auth/sessions/${target.id}`,
          token: caller.token,
        }));
      }),
  };
}

function planLogout(n: SessionCount | 0, amount: number): Planned {
  const size = n === 0 ? 8 : n;
  const perUser = n === 0 ? 8 : endedPerUser(n);
  const users = makeUsers(`logout-${n}`, Math.ceil(amount / perUser), size);
  return {
    op: "logout",
    n,
    users,
    requests: () =>
      users.flatMap((user) =>
        user.sessions.slice(0, perUser).map((s) => ({ method: "POST", path: "/auth/logout", token: s.token })),
      ),
  };
}

function planLogoutAll(n: SessionCount | 0, amount: number): Planned {
  const users = makeUsers(`logout-all-${n}`, amount, n === 0 ? 1 : n);
  return {
    op: "logoutAll",
    n,
    users,
    requests: () =>
      users.map((user) => ({ method: "DELETE", path: "/auth/logout", token: (user.sessions[0] as Seeded).token })),
  };
}

function planList(n: SessionCount): Planned {
  const users = makeUsers(`list-${n}`, 1, n);
  return {
    op: "list",
    n,
    users,
    amount: LIST_AMOUNT,
    requests: () => [{ method: "GET", path: "/auth/sessions", token: users[0]!.sessions[0]!.token }],
  };
}

/**
 * Seeds the users' sessions in a child process (this script with `--seed-child`): the plan
 * goes in as a JSON file, the issued ids and tokens come back in another.
 */
async function seed(users: SeedUser[], dir: string): Promise<void> {
  const planFile = join(dir, "seed-plan.json");
  const outFile = join(dir, "seeded.json");
  writeFileSync(planFile, JSON.stringify(users.map(({ userId, size }) => ({ userId, size }))));
  // wrangler's `--persist-to <dir>` keeps its state in `<dir>/v3`; getPlatformProxy's
  // `persist.path` is that v3 directory itself (its default is `.wrangler/state/v3`).
  await run("seeding", process.execPath, [
    fileURLToPath(import.meta.url),
    "--seed-child",
    join(dir, "v3"),
    planFile,
    outFile,
  ]);
  const seeded = new Map(
    (JSON.parse(readFileSync(outFile, "utf8")) as { userId: string; sessions: Seeded[] }[]).map((u) => [
      u.userId,
      u.sessions,
    ]),
  );
  for (const user of users) {
    const sessions = seeded.get(user.userId) ?? [];
    if (sessions.length !== user.size || sessions.some((s) => !s))
      throw new Error(`seeding left ${user.userId} incomplete`);
    user.sessions = sessions;
  }
}

/** The `--seed-child` side: every session through `issueSession` on a getPlatformProxy D1. */
async function seedChild(persistPath: string, planFile: string, outFile: string): Promise<void> {
  const plan = JSON.parse(readFileSync(planFile, "utf8")) as { userId: string; size: number }[];
  const users = plan.map((u) => ({ ...u, sessions: [] as Seeded[] }));
  const jobs = users.flatMap((user) => Array.from({ length: user.size }, (_, index) => ({ user, index })));
  const { getPlatformProxy } = await import("wrangler");
  const proxy = await getPlatformProxy<Env>({
    configPath: join(PROJECT, "wrangler.toml"),
    persist: { path: persistPath },
    remoteBindings: false,
  });
  try {
    const shards = openShards(proxy.env);
    const config = readConfig(proxy.env);
    let next = 0;
    let done = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: SEED_CONCURRENCY }, async () => {
        for (let j = next++; j < jobs.length; j = next++) {
          const { user, index } = jobs[j] as (typeof jobs)[number];
          const { id, token } = await issueSession(shards, config, {
            userId: user.userId,
            ipAddress: `198.51.100.${(j % 250) + 1}`,
            userAgent: USER_AGENTS[j % USER_AGENTS.length] as string,
            country: "DE",
            city: "Berlin",
          });
          user.sessions[index] = { id, token };
          if (++done % 1000 === 0) log(`  seeded ${done}/${jobs.length}`);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    log(
      `seeded ${jobs.length} sessions for ${users.length} users in ${seconds.toFixed(1)} s (${fmt(jobs.length / seconds)}/s)`,
    );
    writeFileSync(outFile, JSON.stringify(users.map(({ userId, sessions }) => ({ userId, sessions }))));
  } finally {
    await proxy.dispose();
  }
}

// ---------------------------------------------------------------------------------------
// Measuring.

interface Measured {
  op: OperationKey;
  n: number;
  requests: number;
  non2xx: number;
  statuses: string;
  rps: number;
  p50: number;
  p99: number;
  /** The worker's own `duration_ms` from its log lines (inside workerd, D1 included). */
  worker: { p50: number; p99: number } | null;
  roundTrips: { min: number; max: number } | null;
  problems: string[];
}

async function measure(server: DevServer, plan: Planned): Promise<Measured> {
  if (stopping) throw new Error("stopping");
  const list = plan.requests();
  const { method } = OPERATIONS[plan.op];
  let next = 0;
  const options: CannonOptions = {
    url: server.base,
    connections: CONNECTIONS,
    pipelining: 1,
    timeout: REQUEST_TIMEOUT_S,
    sampleInt: 100,
    amount: plan.amount ?? list.length,
  };
  if (plan.op === "list") {
    const only = list[0] as (typeof list)[number];
    options.requests = [{ method: "GET", path: only.path, headers: { authorization: `Bearer ${only.token}` } }];
  } else {
    // One request per distinct session or user: autocannon asks for exactly `amount`
    // requests (one setupRequest call each), walking through the list in order.
    options.requests = [
      {
        method,
        setupRequest: (request) => {
          const item = list[next++];
          if (!item) throw new Error("bench: ran out of seeded sessions");
          return {
            ...request,
            method: item.method,
            path: item.path,
            headers: { authorization: `Bearer ${item.token}` },
          };
        },
      },
    ];
  }
  const from = server.lines.length;
  const result = await cannon(options);
  const responses = Object.values(result.statusCodeStats).reduce((sum, s) => sum + s.count, 0);
  const lines = await server.linesSince(from, responses);
  const problems: string[] = [];
  const where = `${OPERATIONS[plan.op].label} with ${plan.n} session(s)`;
  if (result.non2xx > 0) problems.push(`${where}: ${result.non2xx} non-2xx responses`);
  if (result.errors > 0 || result.timeouts > 0) {
    problems.push(`${where}: ${result.errors} connection errors, ${result.timeouts} timeouts`);
  }
  if (responses !== options.amount) {
    problems.push(`${where}: ${responses} responses for ${options.amount} requests`);
  }
  const not200 = Object.keys(result.statusCodeStats).filter((status) => status !== "200");
  if (not200.length > 0) problems.push(`${where}: statuses ${not200.join(", ")} besides 200`);
  if (lines.length !== responses)
    problems.push(`${where}: ${lines.length} request log lines for ${responses} responses`);
  const foreign = lines.filter((line) => line.method !== method || line.status !== 200);
  if (foreign.length > 0) {
    const sample = foreign[0] as RequestLine;
    problems.push(
      `${where}: ${foreign.length} log lines are not ${method} ... 200 (e.g. ${sample.method} ${sample.route} ${sample.status})`,
    );
  }
  const trips = lines.map((line) => line.d1_round_trips);
  const durations = lines.map((line) => line.duration_ms).sort((a, b) => a - b);
  // Nearest-rank percentile.
  const rank = (p: number) => durations[Math.max(0, Math.ceil((p / 100) * durations.length) - 1)] as number;
  return {
    op: plan.op,
    n: plan.n,
    requests: responses,
    non2xx: result.non2xx,
    statuses: Object.entries(result.statusCodeStats)
      .map(([status, s]) => `${status}×${s.count}`)
      .join(", "),
    rps: responses / result.seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    worker: durations.length > 0 ? { p50: rank(50), p99: rank(99) } : null,
    roundTrips: trips.length > 0 ? { min: Math.min(...trips), max: Math.max(...trips) } : null,
    problems,
  };
}

/** GET /auth/sessions with the user's first token must list exactly the sessions seeded. */
async function verifySeeded(server: DevServer, user: SeedUser): Promise<void> {
  const token = (user.sessions[0] as Seeded).token;
  const response = await fetch(`${server.base}/auth/sessions`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_S * 1000),
  });
  const body = (await response.json()) as { sessions?: { id: string }[] };
  const listed = new Set((body.sessions ?? []).map((s) => s.id));
  const missing = user.sessions.filter((s) => !listed.has(s.id));
  if (response.status !== 200 || listed.size !== user.size || missing.length > 0) {
    throw new Error(
      `wrangler dev does not see the seeded rows of ${user.userId}: status ${response.status}, ` +
        `${listed.size} listed, ${user.size} seeded, ${missing.length} missing`,
    );
  }
}

// ---------------------------------------------------------------------------------------
// Report.

function packageVersion(name: string, from = join(PROJECT, "package.json")): string {
  // Resolve as `from` would, then walk up to the package's own package.json.
  try {
    let dir = dirname(createRequire(from).resolve(name));
    for (;;) {
      try {
        const json = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
        if (json.name === name && json.version) return json.version;
      } catch {}
      const parent = dirname(dir);
      if (parent === dir) return "unknown";
      dir = parent;
    }
  } catch {
    return "unknown";
  }
}

function machine(): string {
  let model = cpus()[0]?.model ?? "unknown";
  try {
    model = /^model name\s*:\s*(.+)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? model;
  } catch {}
  const gib = (totalmem() / 1024 ** 3).toFixed(1);
  return `${cpus().length} cores, ${model}, ${gib} GiB RAM, Linux ${release()}`;
}

function versions(): string {
  const wranglerPkg = join(PROJECT, "node_modules", "wrangler", "package.json");
  const miniflareMain = (() => {
    try {
      return createRequire(wranglerPkg).resolve("miniflare");
    } catch {
      return wranglerPkg;
    }
  })();
  return [
    `node ${process.version}`,
    `wrangler ${packageVersion("wrangler")}`,
    `workerd ${packageVersion("workerd", miniflareMain)} (miniflare ${packageVersion("miniflare", wranglerPkg)})`,
    `hono ${packageVersion("hono")}`,
    `drizzle-orm ${packageVersion("drizzle-orm")}`,
    `autocannon ${packageVersion("autocannon")}`,
  ].join(", ");
}

const fmt = (value: number, digits = 0) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

function table(results: Measured[]): string {
  const rows = [
    "| Operation | Sessions per user | Requests | Non-2xx | Req/s | p50 (ms) | p99 (ms) | Worker p50 / p99 (ms) | D1 round trips per request (min–max) |",
    "|---|--:|--:|--:|--:|--:|--:|--:|:-:|",
  ];
  for (const r of results) {
    const trips = r.roundTrips ? `${r.roundTrips.min}–${r.roundTrips.max}` : "n/a";
    const worker = r.worker ? `${r.worker.p50} / ${r.worker.p99}` : "n/a";
    rows.push(
      `| \`${OPERATIONS[r.op].label}\` | ${r.n} | ${fmt(r.requests)} | ${r.non2xx} | ${fmt(r.rps)} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${worker} | ${trips} |`,
    );
  }
  return rows.join("\n");
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const wallStart = performance.now();
  const startedAt = new Date();
  const loadBefore = loadavg()[0] ?? 0;
  runId = startedAt.getTime();
  const command =
    process.env.npm_lifecycle_event === "bench"
      ? `npm run bench${args.length > 0 ? ` -- ${args.join(" ")}` : ""}`
      : `node scripts/bench.ts${args.length > 0 ? ` ${args.join(" ")}` : ""}`;

  log("measuring the bundle (wrangler deploy --dry-run)");
  const bundle: BundleSize = await measureBundle();

  stateDir = mkdtempSync(join(tmpdir(), "session-bench-"));
  log(`applying migrations to a fresh local D1 in ${stateDir}`);
  await run("wrangler d1 migrations apply", "npx", [
    "wrangler",
    "d1",
    "migrations",
    "apply",
    "DB",
    "--local",
    "--persist-to",
    stateDir,
  ]);

  const warmups = [planDeleteSession(0, 8), planLogout(0, 8), planLogoutAll(0, CONNECTIONS)];
  const plans: Planned[] = [];
  for (const n of SESSION_COUNTS) {
    plans.push(
      planList(n),
      planDeleteSession(n, ENDING_ONE_AMOUNT),
      planLogout(n, ENDING_ONE_AMOUNT),
      planLogoutAll(n, LOGOUT_ALL_AMOUNT[n]),
    );
  }
  const allUsers = [...warmups, ...plans].flatMap((plan) => plan.users);
  log(`seeding ${allUsers.reduce((sum, u) => sum + u.size, 0)} sessions through issueSession (getPlatformProxy)`);
  const seedStart = performance.now();
  await seed(allUsers, stateDir);
  const seedSeconds = (performance.now() - seedStart) / 1000;

  const server = new DevServer();
  log("starting wrangler dev");
  await server.start(stateDir);
  log(`wrangler dev answers on ${server.base}; checking it sees the seeded rows`);
  for (const plan of [...warmups, ...plans]) await verifySeeded(server, plan.users[0] as SeedUser);

  const measureStart = performance.now();
  log("warming up");
  const problems: string[] = [];
  const warmList: Planned = { ...(plans.find((p) => p.op === "list" && p.n === 10) as Planned), amount: 200 };
  for (const plan of [warmList, ...warmups]) {
    const warm = await measure(server, plan);
    problems.push(...warm.problems.map((p) => `warm-up: ${p}`));
  }

  const results: Measured[] = [];
  for (const plan of plans) {
    log(`${OPERATIONS[plan.op].label}, ${plan.n} session(s) per user`);
    const result = await measure(server, plan);
    log(
      `  ${result.requests} requests, ${fmt(result.rps)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms, ` +
        `worker p50 ${result.worker?.p50} ms, ` +
        `statuses ${result.statuses}, round trips ${result.roundTrips ? `${result.roundTrips.min}-${result.roundTrips.max}` : "n/a"}`,
    );
    results.push(result);
    problems.push(...result.problems);
  }
  const measureSeconds = (performance.now() - measureStart) / 1000;
  const reloads = [...server.reloads];
  await server.stop();

  // Logout-all must cost the same round trips whatever the number of sessions it ends.
  const tripsOf = (n: number) => results.find((r) => r.op === "logoutAll" && r.n === n)?.roundTrips;
  const one = tripsOf(1);
  const hundred = tripsOf(100);
  const same = one && hundred && one.min === hundred.min && one.max === hundred.max && one.min === one.max;
  const logoutAllLine = same
    ? `Logout-all costs ${one.min} D1 round trip(s) per request both when it ends 1 session and when it ends 100.`
    : `Logout-all round trips differ: ${JSON.stringify(one)} at 1 session, ${JSON.stringify(hundred)} at 100.`;
  if (!same) problems.push(logoutAllLine);
  if (reloads.length > 0) {
    problems.push(
      `wrangler dev rebuilt the worker during the run (src/ changed), numbers are suspect: ${reloads.join(" | ")}`,
    );
  }

  const totalSeconds = (performance.now() - wallStart) / 1000;
  const overBudget = bundle.gzipBytes > GZIP_BUDGET_BYTES;
  const markdown = [
    `Run ${startedAt.toISOString().replace(/\.\d+Z$/, "Z")} with \`${command}\`; the whole bench took ${fmt(totalSeconds)} s ` +
      `(seeding ${fmt(seedSeconds)} s, measuring ${fmt(measureSeconds)} s).`,
    "",
    `- Machine: ${machine()}; load average ${loadBefore.toFixed(2)} when the run started.`,
    `- Versions: ${versions()}.`,
    `- Load: autocannon, ${CONNECTIONS} connections, no pipelining, 127.0.0.1 only; the list sends ${LIST_AMOUNT} requests with one token, ` +
      "every other row one request per distinct seeded session (or user, for logout-all); " +
      "the single-session deletes and logouts end up to N/2 sessions of each user, so it holds N down to N/2+1.",
    "",
    table(results),
    "",
    logoutAllLine,
    "",
    `Bundle (\`npm run size\`): ${fmt(bundle.minifiedBytes)} B minified, ${fmt(bundle.gzipBytes)} B gzip -9 ` +
      `(budget ${fmt(GZIP_BUDGET_BYTES)} B${overBudget ? ", EXCEEDED" : ""}).`,
    ...(problems.length > 0 ? ["", "Problems:", ...problems.map((p) => `- ${p}`)] : []),
  ].join("\n");

  console.log(markdown);
  if (WRITE && problems.length > 0) {
    log("not updating BENCHMARKS.md: this run had problems");
  } else if (WRITE) {
    const current = readFileSync(BENCHMARKS_MD, "utf8");
    const start = current.indexOf(START_MARKER);
    const end = current.indexOf(END_MARKER);
    if (start < 0 || end < start) throw new Error(`BENCHMARKS.md lacks the ${START_MARKER} ... ${END_MARKER} markers`);
    writeFileSync(
      BENCHMARKS_MD,
      `${current.slice(0, start + START_MARKER.length)}\n${markdown}\n${current.slice(end)}`,
    );
    log("updated BENCHMARKS.md");
  }
  for (const problem of problems) log(`FAIL: ${problem}`);
  if (overBudget) log(`note: the bundle exceeds its gzip budget (npm run size fails)`);
  return problems.length > 0 ? 1 : 0;
}

if (SEED_CHILD) {
  const [, persistPath, planFile, outFile] = args;
  if (!persistPath || !planFile || !outFile)
    throw new Error("usage: --seed-child <persist path> <plan file> <out file>");
  await seedChild(persistPath, planFile, outFile);
} else {
  installExitHandlers();
  let exitCode = 1;
  try {
    exitCode = await main();
  } catch (error) {
    // After a signal, whatever was running fails on purpose: that is not news.
    if (!stopping) log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : error}`);
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}
