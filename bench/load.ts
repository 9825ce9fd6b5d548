// Load (bench/bench.ts, phase 3): the rows autocannon fires at the service and the bare
// worker on wrangler's dev server, each destructive request on a session of its own.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { listEvents } from "../src/db/events.ts";
import type { readConfig } from "../src/domain/config.ts";
import { authenticateBatchOf, type CostKey, listBatchOf, type Statement, userListBatchOf } from "./cost.ts";
import { problems } from "./harness.ts";
import { app, browser, type Seeded, seedUsers } from "./seed.ts";

export const CONNECTIONS = 10;
// 200 requests a row over 3 repetitions left two rows doing the same work 0.15 apart.
export const AMOUNT = 500;
/** Requests per row of the warm-up, which is not measured. */
export const WARMUP_AMOUNT = 100;
export const REPETITIONS = 5;
/**
 * Requests per row of an operation and of its own batch's replays, whose share of the two is read
 * to within 10%: at AMOUNT (a second a row on a fast machine) one pair's ratio ranged 0.75 to
 * 1.22 across the repetitions of one run.
 */
export const PAIRED_AMOUNT = 1_500;
const LOAD_SIZES = [5, 50] as const;

// autocannon has no type declarations; this is the part of its API used here.

interface CannonRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
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

export interface Row {
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
  /**
   * A service row whose own batch a replay row replays: the same name on both (its share of the
   * replay is shown); or a replay row that does more of what that service row does (`sized`,
   * `signs`), whose share of the plain replay is shown.
   */
  batch?: string;
  /** A replay row: the `batch` of the service row whose batch it replays. */
  replays?: string;
  /**
   * A replay row that also answers as many bytes as the service row of its `batch` does; `bytes`
   * is that size, read from one request once the servers are up (`sizeAnswers`).
   */
  sized?: true;
  bytes?: number;
  /** A replay row that also signs an access token as `POST /auth/token` does (the bare worker's `?sign`). */
  signs?: true;
  /** One request each: distinct tokens for the destructive operations. */
  requests: () => CannonRequest[];
}

export interface Run {
  rps: number;
  p50: number;
  p99: number;
  /** workerd's CPU per request (µs), all its processes; null without /proc. */
  cpuMicros: number | null;
}

/**
 * The CPU time (ms) every workerd process this benchmark started has used so far, from /proc:
 * the dev servers' proxies, the workers and their local D1, whose threads are what a row's
 * throughput waits on. Only this process's descendants: on a shared machine, another user's
 * workerd (a test run's) must not count. Null where there is no /proc.
 */
function workerdCpuMs(): number | null {
  if (!existsSync("/proc/self/stat")) return null;
  const processes = new Map<number, { parent: number; workerd: boolean; ticks: number }>();
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // After the command's closing parenthesis: the parent is the 2nd field, utime and stime the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      processes.set(Number(pid), {
        parent: Number(fields[1]),
        workerd: stat.includes(" (workerd) "),
        ticks: Number(fields[11]) + Number(fields[12]),
      });
    } catch {
      // The process ended meanwhile.
    }
  }
  const ours = (pid: number) => {
    for (let at = processes.get(pid)?.parent; at !== undefined && at > 1; at = processes.get(at)?.parent)
      if (at === process.pid) return true;
    return false;
  };
  let ticks = 0;
  for (const [pid, { workerd, ticks: used }] of processes) if (workerd && ours(pid)) ticks += used;
  // USER_HZ, 100 on every Linux that wrangler runs on.
  return ticks * 10;
}

/** A row's requests per repetition: PAIRED_AMOUNT for an operation and its own batch replayed (never one that ends sessions). */
export const amountOf = (row: Row) =>
  !row.destructive && (row.batch !== undefined || row.replays !== undefined) ? PAIRED_AMOUNT : AMOUNT;

/** Fires exactly `amount` requests and times them from the first to the last response. */
export function fire(base: URL, row: Row, amount = amountOf(row)): Promise<Run> {
  const list = row.requests();
  const cpuBefore = workerdCpuMs();
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
        const cpuAfter = workerdCpuMs();
        const cpuMicros = cpuBefore === null || cpuAfter === null ? null : ((cpuAfter - cpuBefore) * 1000) / answered;
        resolve({
          rps: answered / ((last - started) / 1000),
          p50: result.latency.p50,
          p99: result.latency.p99,
          cpuMicros,
        });
      },
    );
    instance.on("response", () => (last = performance.now()));
  });
}

/** A row of the bare worker replaying `what` (`POST /batch`: its statements as one batch, from a JSON body). */
function replayRow(n: number, what: string, batch: Statement[]): Row {
  const body = JSON.stringify(batch);
  const row: Row = {
    label: `bare Hono worker replaying ${what}, from a JSON body`,
    n,
    server: "bare",
    status: 200,
    requests: () => [
      {
        method: "POST",
        path: row.bytes !== undefined ? `/batch?bytes=${row.bytes}` : row.signs ? "/batch?sign" : "/batch",
        headers: { "content-type": "application/json" },
        body,
      },
    ],
  };
  return row;
}

/**
 * Each `sized` row gets the answer size of the service row of its `batch`, from one request of
 * it: the bytes the service writes, and the harness carries, for every request.
 */
export async function sizeAnswers(urls: Record<Row["server"], URL>, rows: Row[]): Promise<void> {
  for (const row of rows.filter((row) => row.sized)) {
    const like = rows.find((other) => other.server === "service" && other.batch === row.batch) as Row;
    const { method, path, headers } = like.requests()[0] as CannonRequest;
    const response = await fetch(new URL(path as string, urls[like.server]), { method, headers });
    row.bytes = (await response.arrayBuffer()).byteLength;
    if (response.status !== like.status) problems.push(`${like.label} (${like.n}): ${response.status} when sized`);
    row.label = row.label.replace("{bytes}", row.bytes.toLocaleString("en-US"));
  }
}

/** The sessions a whoami or token row's user holds: the size of the load's smaller list (its rows do not depend on it). */
const AUTHENTICATED_SIZE = 5;

/**
 * `GET /auth/whoami` and `POST /auth/token`, each beside its own batch (authenticate's) replayed
 * by the bare worker: by a browser's session cookie (judged, nothing changed: 3 statements), as the
 * list rows send theirs, and by an app's session as Bearer (never judged: 2). The token's batch is
 * replayed once more signing a token as the route does: what its signature alone costs here.
 */
async function authenticatedRows(env: Env, config: ReturnType<typeof readConfig>): Promise<Row[]> {
  const [browsers] = (await seedUsers(env.DB, config, 1, AUTHENTICATED_SIZE)) as [Seeded[]];
  const [apps] = (await seedUsers(env.DB, config, 1, AUTHENTICATED_SIZE, "bearer")) as [Seeded[]];
  const n = AUTHENTICATED_SIZE;
  const rows: Row[] = [];
  const routes = [
    ["whoami", "GET", "/auth/whoami"],
    ["token", "POST", "/auth/token"],
  ] as const;
  for (const [key, method, path] of routes) {
    for (const carrier of ["cookie", "bearer"] as const) {
      const own = carrier === "cookie" ? browsers : apps;
      const headers = carrier === "cookie" ? browser(own[0] as Seeded) : app(own[0] as Seeded);
      const cost: CostKey = carrier === "cookie" ? key : `${key}Bearer`;
      const as = carrier === "cookie" ? "" : " as Bearer (an app's session, not judged)";
      const batch = `${cost} ${n}`;
      rows.push({
        label: `\`${method} ${path}\`${as}`,
        n,
        server: "service",
        against: "ceiling",
        cost,
        batch,
        status: 200,
        requests: () => [{ method, path, headers }],
      });
      const replayed = await authenticateBatchOf(env, config, own, carrier);
      const which = `\`SessionService.authenticate\`'s${carrier === "cookie" ? ", judged" : ", as Bearer"}`;
      rows.push({ ...replayRow(n, `its own batch (${which})`, replayed), cost, replays: batch });
      if (key === "token")
        rows.push(
          Object.assign(
            replayRow(n, `its own batch (${which}) and signing an access token as the route does`, replayed),
            {
              cost,
              batch,
              signs: true as const,
            },
          ),
        );
    }
  }
  return rows;
}

export async function loadRows(env: Env, config: ReturnType<typeof readConfig>): Promise<Row[]> {
  const d1 = env.DB;
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
      batch: `list ${n}`,
      status: 200,
      requests: () => [{ method: "GET", path: "/auth/sessions", headers: browser(reader[0] as Seeded) }],
    });
    // The same batch (statements and values) replayed by the bare worker: what the list's SQL
    // costs on this harness without the service's own work around it.
    const listBatch = await listBatchOf(env, config, reader);
    rows.push({
      ...replayRow(n, "the list's batch (its statements and values)", listBatch),
      cost: "list",
      replays: `list ${n}`,
    });
    // ...answering as many bytes as the list: what the answer's size alone costs on this harness,
    // its share of the replay above.
    rows.push(
      Object.assign(replayRow(n, "the list's batch and answering as many bytes ({bytes} B)", listBatch), {
        cost: "list" as const,
        batch: `list ${n}`,
        sized: true as const,
      }),
    );
    // The same user's security log, one `created` event per session, beside its own batch replayed.
    rows.push({
      label: "`GET /auth/events`",
      n,
      server: "service",
      against: "ceiling",
      cost: "events",
      batch: `events ${n}`,
      status: 200,
      requests: () => [{ method: "GET", path: "/auth/events", headers: browser(reader[0] as Seeded) }],
    });
    rows.push({
      ...replayRow(
        n,
        "the log's batch (its statements and values)",
        await listBatchOf(env, config, reader, listEvents),
      ),
      cost: "events",
      replays: `events ${n}`,
    });
    // The floor under any list: the same user's sessions read with nothing to prove, judge or record.
    rows.push(
      replayRow(
        n,
        "`SessionService.listUserSessions` for the same user (no token, no check, no activity)",
        await userListBatchOf(env, config, reader),
      ),
    );
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
  rows.push(...(await authenticatedRows(env, config)));
  // The bare worker again at the end: each repetition's baseline is the mean of the two, so
  // a machine that speeds up or slows down during a repetition is not charged to the rows.
  rows.push({ ...(rows[0] as Row), label: "bare Hono worker `GET /`, again at the end of each repetition" });
  return rows;
}
