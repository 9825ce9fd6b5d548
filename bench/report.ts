// The Markdown the benchmark (bench/bench.ts) prints and, with --write, puts into
// BENCHMARKS.md between its markers: the run, the throughput table, the worker's own time,
// the cost per operation with its price, and the bundle.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus } from "node:os";
import { join } from "node:path";
import { GZIP_BUDGET_BYTES, type measureBundle } from "../test/checks/bundle-size.ts";
import { COST_LABELS, COST_TABLE_SIZES, type Cost } from "./cost.ts";
import { fmt, median, PROJECT, problems } from "./harness.ts";
import { AMOUNT, CONNECTIONS, PAIRED_AMOUNT, REPETITIONS, type Row, type Run } from "./load.ts";
import {
  OWN_LOOP,
  OWN_OPERATION_LOOP,
  OWN_OPERATION_REPETITIONS,
  OWN_REPETITIONS,
  type OwnTime,
  PART_KEYS,
} from "./own-time.ts";

const BENCHMARKS_MD = join(PROJECT, "BENCHMARKS.md");
const START_MARKER = "<!-- bench:results:start -->";
const END_MARKER = "<!-- bench:results:end -->";

/** What one run measured, and how it was run. */
export interface Measured {
  command: string;
  startedAt: Date;
  seconds: { total: number; seed: number; load: number };
  loadStart: number[];
  loadEnd: number[];
  rows: Row[];
  runs: Run[][];
  own: OwnTime[];
  /** The worker's CPU per operation, µs by `${key} ${n}`. */
  cpu: Map<string, number>;
  /** The first layers of the lists, µs by `${key} ${n} ${part}` (own-time.ts `partTimes`). */
  parts: Map<string, number>;
  costs: { small: Cost[]; large: Cost[]; tableRows: number };
  bundle: Awaited<ReturnType<typeof measureBundle>>;
}

function ownTable(times: OwnTime[]): string {
  return [
    "| Path | µs per request (fastest repetition) | Ratio to bare (requests per second of one core) |",
    "|---|--:|--:|",
    ...times.map((t) => `| ${t.label} | ${fmt(t.micros, 1)} | ${t.ratio === null ? "–" : fmt(t.ratio, 2)} |`),
  ].join("\n");
}

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
    "| Row | Sessions per user | Req/s (median) | p50 / p99 (ms) | workerd CPU per request (µs, median) | Ratio to bare | Share of its own no-database ceiling | Share of the bare worker's `GET /d1` | Share of its own batch replayed | Rows written |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
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
    const toFloor = row.n !== null ? fmt(ratio(i, rpsOf(floor)), 2) : "–";
    // An operation against the bare worker replaying its own batch: what its work around the SQL costs.
    const replay = row.batch === undefined ? -1 : rows.findIndex((other) => other.replays === row.batch);
    const toReplay = replay >= 0 ? fmt(ratio(i, rpsOf(replay)), 2) : "–";
    const cpu = own.map((r) => r.cpuMicros).filter((micros) => micros !== null);
    const written = row.cost ? String(costs.find((c) => c.key === row.cost && c.n === row.n)?.rowsWritten ?? "?") : "–";
    lines.push(
      `| ${row.label} | ${row.n ?? "–"} | ${fmt(median(own.map((r) => r.rps)))} | ${fmt(median(own.map((r) => r.p50)))} / ${fmt(median(own.map((r) => r.p99)))} | ${cpu.length > 0 ? fmt(median(cpu)) : "–"} | ${fmt(ratio(i, bareOf), 2)} | ${share} | ${toFloor} | ${toReplay} | ${written} |`,
    );
  });
  return lines.join("\n");
}

/**
 * Where a list's CPU goes, layer by layer, at 1 session and at 50, and what each layer costs per
 * session more: its time at 50 less its time at 1, over 49.
 */
function partsTable(cpu: Map<string, number>, parts: Map<string, number>): string {
  const layers = [
    [
      "the database function: its statements, D1's answer replayed and decoded",
      (k: string, n: number) => parts.get(`${k} ${n} db`),
    ],
    ["the service: the view", (k: string, n: number) => sub(parts.get(`${k} ${n} service`), parts.get(`${k} ${n} db`))],
    [
      "the entry point: middleware, the token's proof, JSON, the response",
      (k: string, n: number) => sub(cpu.get(`${k} ${n}`), parts.get(`${k} ${n} service`)),
    ],
    ["the whole operation", (k: string, n: number) => cpu.get(`${k} ${n}`)],
  ] as const;
  const lines = ["| Operation | Layer | µs at 1 | µs at 50 | µs per session more |", "|---|---|--:|--:|--:|"];
  for (const key of PART_KEYS) {
    for (const [layer, time] of layers) {
      const one = time(key, 1);
      const fifty = time(key, 50);
      const per = one === undefined || fifty === undefined ? undefined : (fifty - one) / 49;
      lines.push(`| ${COST_LABELS[key]} | ${layer} | ${show(one)} | ${show(fifty)} | ${show(per, 2)} |`);
    }
  }
  return lines.join("\n");
}

function sub(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined ? undefined : a - b;
}

function show(micros: number | undefined, digits = 0): string {
  return micros === undefined ? "–" : fmt(micros, digits);
}

/** The report of a run, with the problems found so far. */
export function markdownOf(run: Measured): string {
  return [
    `Run ${run.startedAt.toISOString().replace(/\.\d+Z$/, "Z")} with \`${run.command}\`: ${fmt(run.seconds.total)} s in all ` +
      `(cost and seeding ${fmt(run.seconds.seed)} s, load ${fmt(run.seconds.load)} s). ${cpus().length} cores; ` +
      `load average (1/5/15 min) ${run.loadStart.map((l) => l.toFixed(2)).join(" / ")} at the start, ` +
      `${run.loadEnd.map((l) => l.toFixed(2)).join(" / ")} at the end. Node ${process.version}, ${versions()}.`,
    "",
    `**Throughput** (autocannon, ${CONNECTIONS} connections, ${AMOUNT} requests per row, ${fmt(PAIRED_AMOUNT)} for an operation and its own batch replayed, ${REPETITIONS} interleaved repetitions, medians; ` +
      "each ratio is the median of the repetitions' own ratios, to the mean of the bare worker's first and last row there):",
    "",
    loadTable(run.rows, run.runs, run.costs.large),
    "",
    `**The worker's own time per request** (its \`fetch\` called ${fmt(OWN_LOOP)} times in a loop inside workerd by one request, ` +
      `no dev server and no database; the access token's signing the same way, ${fmt(OWN_LOOP)} tokens for one request; ${OWN_REPETITIONS} interleaved repetitions, the fastest of each row; the ratio is the bare worker's time over the row's):`,
    "",
    ownTable(run.own),
    "",
    "**Cost per operation** (D1's `meta` summed over the operation's one round trip; the worker's CPU: " +
      `the operation in the own-time loop, ${fmt(OWN_OPERATION_LOOP)} times, its D1 answers replayed, the fastest of ${OWN_OPERATION_REPETITIONS} repetitions; ` +
      `dollars per million operations at $${PRICES.rowWritten.toFixed(2)} per million rows written, $${PRICES.rowRead} per million rows read, ` +
      `$${PRICES.request.toFixed(2)} per million requests and $${PRICES.cpuMs.toFixed(2)} per million CPU-ms, Cloudflare's prices on 2026-11-25, ` +
      "on the table of the fourth column before last):",
    "",
    costTable(run.costs.small, run.costs.large, run.costs.tableRows, run.cpu),
    "",
    `**Where a list's CPU goes** (the same loop, ${fmt(OWN_OPERATION_LOOP)} times, stopped after each layer: \`part\` in bench/own/; a layer is the one above less the one below it):`,
    "",
    partsTable(run.cpu, run.parts),
    "",
    `**Bundle** (\`npm run size\`): ${fmt(run.bundle.minifiedBytes)} B minified, ${fmt(run.bundle.gzipBytes)} B gzip -9 ` +
      `(budget ${fmt(GZIP_BUDGET_BYTES)} B${run.bundle.gzipBytes > GZIP_BUDGET_BYTES ? ", EXCEEDED" : ""}).`,
    ...(problems.length > 0 ? ["", "Problems:", ...problems.map((p) => `- ${p}`)] : []),
  ].join("\n");
}

/** Puts `markdown` into BENCHMARKS.md between its markers. */
export function writeIntoBenchmarksMd(markdown: string): void {
  const current = readFileSync(BENCHMARKS_MD, "utf8");
  const start = current.indexOf(START_MARKER);
  const end = current.indexOf(END_MARKER);
  if (start < 0 || end < start) throw new Error(`BENCHMARKS.md lacks the ${START_MARKER} ... ${END_MARKER} markers`);
  writeFileSync(BENCHMARKS_MD, `${current.slice(0, start + START_MARKER.length)}\n${markdown}\n${current.slice(end)}`);
}
