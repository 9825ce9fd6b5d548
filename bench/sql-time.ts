// The SQL of a judged request, statement by statement (BENCHMARKS.md, "The judged request's
// SQL"): for the browser's list at 5 and 50 sessions, whoami and revoking one session, the batch
// each sends (recorded as bench/cost.ts records the load's), each statement's D1 meta (rows read
// and written, duration) from one run through the platform proxy, and SQLite's own time for it
// replayed alone, in the batch's order, REPLAYS times inside a transaction rolled back each time
// (Node's SQLite on the same database file, after the proxy let go of it): medians.
//   npm run bench:sql             # Markdown to stdout, progress to stderr
//   npm run bench:sql -- --write  # ...and into BENCHMARKS.md between its sql-time markers
// Every request is the browser's second: its first (a whoami) recorded its context, so nothing
// changed, and it comes within the activity interval, so no activity is due.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { getPlatformProxy } from "wrangler";
import { migrateLocal } from "../dev/local-server.ts";
import { readConfig } from "../src/domain/config.ts";
import { authenticateBatchOf, listBatchOf, revokeBatchOf, type Statement } from "./cost.ts";
import { fmt, log, median, PROJECT, problems } from "./harness.ts";
import { type Seeded, seedUsers } from "./seed.ts";

const WRITE = process.argv.includes("--write");
/** Replays of each batch; each statement timed alone, the median reported. */
const REPLAYS = 2_000;
/** Sessions of other users around the measured ones, so the indexes are not trivially small. */
const FILLER_USERS = 200;
const FILLER_SIZE = 100;

type Recorder = (env: Env, config: ReturnType<typeof readConfig>, own: Seeded[]) => Promise<Statement[]>;
const OPERATIONS: { label: string; n: number; batch: Recorder }[] = [
  { label: "list `GET /auth/sessions`", n: 5, batch: (env, config, own) => listBatchOf(env, config, own) },
  { label: "list", n: 50, batch: (env, config, own) => listBatchOf(env, config, own) },
  { label: "whoami", n: 5, batch: (env, config, own) => authenticateBatchOf(env, config, own, "cookie") },
  { label: "revoke one `DELETE /auth/sessions/:id`", n: 5, batch: revokeBatchOf },
];

/** What a statement of the head or of an operation is, told by its text. */
function nameOf({ sql }: Statement): string {
  const text = sql.toLowerCase();
  const judged = text.includes('"judged"');
  if (text.startsWith('insert into "session_events"')) return judged ? "context event (INSERT)" : "its event (INSERT)";
  if (text.startsWith('delete from "sessions"')) return judged ? "context end (DELETE)" : "the end (DELETE)";
  if (text.startsWith('update "sessions"')) return "activity (UPDATE)";
  if (text.includes("group_concat")) return "list, caller, move (SELECT)";
  if (text.startsWith("select") && text.includes('from "session_events"')) return "its events (SELECT)";
  if (text.startsWith("select")) return "caller, move (SELECT)";
  return text.slice(0, 30);
}

interface Row {
  operation: string;
  n: number;
  name: string;
  rowsRead: number;
  rowsWritten: number;
  d1Ms: number;
  /** Median µs of SQLite preparing the statement's text, and of running it. */
  prepareMicros: number;
  runMicros: number;
  /** Changed nothing and answered nothing: a request with an unchanged context could skip it. */
  idle: boolean;
}

async function main(): Promise<void> {
  const state = mkdtempSync(join(tmpdir(), "session-sql-time-"));
  try {
    migrateLocal({ persistTo: state });
    const proxy = await getPlatformProxy<Env>({
      configPath: join(PROJECT, "wrangler.toml"),
      persist: { path: join(state, "v3") },
    });
    // Per operation: its batch run once through D1 on one user (meta), recorded on a twin for the replays.
    const measured: { label: string; n: number; metas: D1Meta[]; answers: number[]; replay: Statement[] }[] = [];
    try {
      const config = readConfig(proxy.env);
      const env = proxy.env;
      log(`seeding ${fmt(FILLER_USERS * FILLER_SIZE)} sessions around the measured ones`);
      for (let i = 0; i < FILLER_USERS; i += 50) await seedUsers(env.DB, config, 50, FILLER_SIZE);
      for (const operation of OPERATIONS) {
        const [one, twin] = (await seedUsers(env.DB, config, 2, operation.n)) as [Seeded[], Seeded[]];
        // The browser's first request records its context (and activity): what follows is unchanged.
        for (const own of [one, twin]) await run(env.DB, await authenticateBatchOf(env, config, own, "cookie"));
        const results = await run(env.DB, await operation.batch(env, config, one));
        measured.push({
          label: operation.label,
          n: operation.n,
          metas: results.map((result) => result.meta),
          answers: results.map((result) => result.results.length + result.meta.changes),
          replay: await operation.batch(env, config, twin),
        });
      }
    } finally {
      await proxy.dispose();
    }
    const rows: Row[] = [];
    const file = sqliteFileOf(join(state, "v3", "d1"));
    const sqlite = new DatabaseSync(file);
    try {
      for (const { label, n, metas, answers, replay } of measured) {
        log(`replaying ${label} at ${n}, ${fmt(REPLAYS)} times`);
        const times = replayAlone(sqlite, replay);
        replay.forEach((statement, i) => {
          const meta = metas[i] as D1Meta;
          rows.push({
            operation: label,
            n,
            name: nameOf(statement),
            rowsRead: meta.rows_read,
            rowsWritten: meta.rows_written,
            d1Ms: meta.duration,
            prepareMicros: median(times.prepare[i] as number[]),
            runMicros: median(times.run[i] as number[]),
            idle: answers[i] === 0,
          });
        });
      }
    } finally {
      sqlite.close();
    }
    const markdown = markdownOf(rows);
    console.log(markdown);
    if (WRITE && problems.length === 0) {
      const path = join(PROJECT, "BENCHMARKS.md");
      const current = readFileSync(path, "utf8");
      const [start, end] = ["<!-- sql-time:start -->", "<!-- sql-time:end -->"];
      const from = current.indexOf(start);
      const to = current.indexOf(end);
      if (from < 0 || to < from) throw new Error(`BENCHMARKS.md lacks the ${start} ... ${end} markers`);
      writeFileSync(path, `${current.slice(0, from + start.length)}\n${markdown}\n${current.slice(to)}`);
      log("updated BENCHMARKS.md");
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

async function run(d1: D1Database, batch: Statement[]) {
  const results = await d1.batch<Record<string, unknown>>(
    batch.map(({ sql, params }) => d1.prepare(sql).bind(...params)),
  );
  for (const result of results) if (!result.success) problems.push(`a statement failed: ${result.error}`);
  return results;
}

/** The one database file of the local D1 (miniflare keeps it under a hashed name). */
function sqliteFileOf(dir: string): string {
  const found = readdirSync(dir, { recursive: true, encoding: "utf8" }).filter(
    (name) => name.endsWith(".sqlite") && !name.includes("metadata"),
  );
  if (found.length !== 1) throw new Error(`expected one local D1 database file, found: ${found.join(", ")}`);
  return join(dir, found[0] as string);
}

type SqliteValue = null | number | bigint | string | Uint8Array;

/**
 * Each statement of `batch` in order, timed alone, prepared once as D1 keeps its prepared
 * statements, in a transaction rolled back after the last: every replay sees the database as
 * the first did. Preparing each text is timed apart: what a statement costs the first time.
 */
function replayAlone(sqlite: DatabaseSync, batch: Statement[]) {
  const prepare = batch.map(() => [] as number[]);
  const runTimes = batch.map(() => [] as number[]);
  const statements = batch.map(({ sql }) => sqlite.prepare(sql));
  for (let r = 0; r < REPLAYS; r++) {
    sqlite.exec("BEGIN");
    batch.forEach(({ params }, i) => {
      const started = performance.now();
      statements[i]?.all(...(params as SqliteValue[]));
      runTimes[i]?.push((performance.now() - started) * 1000);
    });
    sqlite.exec("ROLLBACK");
    if (r % 10 === 0)
      batch.forEach(({ sql }, i) => {
        const started = performance.now();
        sqlite.prepare(sql);
        prepare[i]?.push((performance.now() - started) * 1000);
      });
  }
  return { prepare, run: runTimes };
}

function markdownOf(rows: Row[]): string {
  const lines = [
    `${new Date().toISOString().slice(0, 10)}, among ${fmt(FILLER_USERS * FILLER_SIZE)} other sessions, SQLite ${new DatabaseSync(":memory:").prepare("SELECT sqlite_version() AS v").get()?.v}, medians of ${fmt(REPLAYS)} (µs):`,
    "",
    "| operation | n | statement | rows read | written | D1 ms | prepare | run | idle |",
    "|---|--:|---|--:|--:|--:|--:|--:|:-:|",
  ];
  // Each operation's statements, its label on the first, then its batch's sums.
  rows.forEach((row, i) => {
    const first = i === 0 || rows[i - 1]?.operation !== row.operation || rows[i - 1]?.n !== row.n;
    const label = first ? `${row.operation} | ${row.n}` : " | ";
    lines.push(
      `| ${label} | ${row.name} | ${row.rowsRead} | ${row.rowsWritten} | ${row.d1Ms} | ${fmt(row.prepareMicros)} | ${fmt(row.runMicros, 1)} | ${row.idle ? "yes" : ""} |`,
    );
    const next = rows[i + 1];
    if (next?.operation === row.operation && next.n === row.n) return;
    const own = rows.filter((other) => other.operation === row.operation && other.n === row.n);
    const sum = (of: (other: Row) => number) => own.reduce((total, other) => total + of(other), 0);
    lines.push(
      `|  |  | **the batch** | ${sum((r) => r.rowsRead)} | ${sum((r) => r.rowsWritten)} |  | ${fmt(sum((r) => r.prepareMicros))} | ${fmt(
        sum((r) => r.runMicros),
        1,
      )} |  |`,
    );
  });
  return lines.join("\n");
}

try {
  await main();
} catch (error) {
  problems.push(`failed: ${error instanceof Error ? (error.stack ?? error.message) : error}`);
}
for (const problem of problems) log(`FAIL: ${problem}`);
process.exit(problems.length > 0 ? 1 : 0);
