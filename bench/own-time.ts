// The worker's own time (bench/bench.ts, phase 4): bench/own/ calls `fetch` of the bare worker or
// of the service's app OWN_LOOP times inside workerd, for one request of the client's, which
// times it. No dev server, proxy or HTTP per call: the CPU time a request of the worker costs,
// which is what production bills, against what the harness costs around it.
import type { Cost } from "./cost.ts";
import { problems } from "./harness.ts";

export const OWN_LOOP = 3_000;
export const OWN_REPETITIONS = 7;
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
  // Not a request: what `POST /auth/token` adds to authenticate's work, on its own line.
  {
    label: "the access token's signing alone (`signAccessToken`: claims, ES256 by WebCrypto, compact JWS), no request",
    target: "sign",
    path: "/",
    status: 200,
  },
] as const;

export interface OwnTime {
  label: string;
  micros: number;
  /** The bare worker's time over this row's; null for a row that is not a request (the signing). */
  ratio: number | null;
}

/** Loop length and repetitions for an operation with a database (each ~10 times a 404's work). */
export const OWN_OPERATION_LOOP = 300;
export const OWN_OPERATION_REPETITIONS = 3;

/**
 * The worker's CPU per operation, µs by `${key} ${n}`: the operation's request (or RPC call)
 * in the own-time loop, its D1 answers replayed from the cost phase (bench/own/).
 */
export async function operationTimes(base: URL, costs: Cost[]): Promise<Map<string, number>> {
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

export async function ownTimes(base: URL): Promise<OwnTime[]> {
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
  return OWN_ROWS.map((row, i) => ({
    label: row.label,
    micros: fastest(i),
    ratio: row.target === "sign" ? null : fastest(0) / fastest(i),
  }));
}

/** The lists whose parts are measured, and their layers (bench/own/ `part`). */
export const PART_KEYS = ["list", "events", "userList"] as const;
const PARTS = ["db", "service"] as const;

/** µs per call by `${key} ${n} ${part}`: the first layers of each list operation, as `operationTimes` times the whole. */
export async function partTimes(base: URL, costs: Cost[]): Promise<Map<string, number>> {
  const times = new Map<string, number>();
  const lists = costs.filter((cost) => (PART_KEYS as readonly string[]).includes(cost.key));
  for (let r = 0; r < OWN_OPERATION_REPETITIONS; r++) {
    for (const cost of lists) {
      for (const part of PARTS) {
        const started = performance.now();
        const response = await fetch(new URL(`/?n=${OWN_OPERATION_LOOP}&part=${part}`, base), {
          method: "POST",
          body: JSON.stringify(cost.operation),
        });
        const statuses = await response.text();
        if (statuses !== "[200]")
          problems.push(`own time of ${cost.key} at ${cost.n}, ${part}: statuses ${statuses}, expected [200]`);
        const micros = ((performance.now() - started) * 1000) / OWN_OPERATION_LOOP;
        const key = `${cost.key} ${cost.n} ${part}`;
        times.set(key, Math.min(micros, times.get(key) ?? Number.POSITIVE_INFINITY));
      }
    }
  }
  return times;
}
