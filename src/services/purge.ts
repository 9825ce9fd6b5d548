import { wrapD1 } from "../db/d1.ts";
import { purgeEvents, purgeSessions } from "../db/purge.ts";
import { openShards } from "../db/shards.ts";
import { purgeInboundSets } from "../db/upstreams/inbound-sets.ts";
import { instant } from "../domain/clock.ts";
import { readConfig } from "../domain/config.ts";
import { logLine } from "../domain/log.ts";
import { UPSTREAM_CLOCK_SKEW_SECONDS, UPSTREAM_TOKEN_MAX_AGE_SECONDS } from "../domain/upstreams/config.ts";
import { logFailure } from "./failure-log.ts";
import { outletsOf } from "./outbox.ts";
import { resendEach } from "./resend.ts";
import { expireSets } from "./ssf/set-expiry.ts";

// Small batches keep each write short (D1 serialises writes). A run keeps deleting while
// batches come back full, on every database, until the invocation's budget is spent;
// whatever is left goes in the next run. Dead rows never authenticate, so lag is harmless.
export const PURGE_BATCH_SIZE = 500;

export interface PurgeBudget {
  /**
   * D1 calls one run may make. Workers allow 1,000 subrequests per invocation and every D1
   * call counts; a retried call counts twice, so the margin keeps a run clear of the limit.
   */
  subrequests: number;
  /** No batch starts after this long; the hourly run stays far from the next one. */
  milliseconds: number;
}

export const PURGE_BUDGET: PurgeBudget = { subrequests: 950, milliseconds: 5 * 60_000 };

export interface PurgeResult {
  /** Events the queue or the streams had not taken, sent again (only with SESSION_EVENTS or SSF_ISSUER). */
  resent: number;
  /** Shared Signals SETs dropped after waiting longer than SSF_SET_RETENTION_DAYS. */
  expiredSets: number;
  sessions: number;
  events: number;
  /** Inbound SETs from upstreams, forgotten once too old to be accepted again. */
  receivedSets: number;
  databases: number;
  subrequests: number;
  /** False when the budget ran out, or a database failed, before every batch came back short. */
  complete: boolean;
  /** Databases that failed this run (each is retried by the next run); the others went on. */
  failed: string[];
}

/**
 * `first`: the database to start with (modulo their number). The cron passes the hour, so
 * when a run's budget cannot reach every database, successive runs start at the next one.
 */
export async function purge(env: Env, budget: PurgeBudget = PURGE_BUDGET, first = 0): Promise<PurgeResult> {
  const config = readConfig(env);
  let subrequests = 0;
  const metered = openShards(env, (d1) =>
    wrapD1(d1, (call) => {
      subrequests++;
      return call();
    }),
  );
  const databases = metered.all();
  const start = first % databases.length;
  const shards = [...databases.slice(start), ...databases.slice(0, start)];
  const at = instant(config);
  const retentionCutoff = new Date(at.now.getTime() - config.eventRetentionDays * 86_400_000);
  // A SET is accepted up to its maximum age after an iat up to the skew ahead: known that long.
  const inboundCutoff = new Date(
    at.now.getTime() - (UPSTREAM_TOKEN_MAX_AGE_SECONDS + UPSTREAM_CLOCK_SKEW_SECONDS) * 1000,
  );
  const deadline = Date.now() + budget.milliseconds;
  const result: PurgeResult = {
    resent: 0,
    expiredSets: 0,
    sessions: 0,
    events: 0,
    receivedSets: 0,
    databases: shards.length,
    subrequests: 0,
    complete: true,
    failed: [],
  };
  // One database that fails (overloaded, unreachable) must not stop the run for the others;
  // each failure has its line, as any failure's, and the run's line names the databases.
  const run = crypto.randomUUID();
  const failed = (binding: string, error: unknown) => {
    logFailure(error, { cron: "purge" }, run);
    result.complete = false;
    if (!result.failed.includes(binding)) result.failed.push(binding);
  };
  // Each call may be retried once (src/db/d1.ts): two subrequests are reserved per call.
  const room = () => (Date.now() < deadline ? Math.max(0, Math.floor((budget.subrequests - subrequests) / 2)) : 0);
  const outlets = outletsOf(env, metered);
  // First, so nothing pending is purged before the queue had its chance this run. A resend
  // batch is two calls (select, mark), and like the purge it stays within the budget.
  result.resent = await resendEach(
    outlets,
    shards,
    at.now,
    () => room() >= 2,
    ({ binding }, error) => failed(binding, error),
  );
  try {
    result.expiredSets = await expireSets(outlets, at.now);
  } catch (error) {
    failed(metered.streams().binding, error);
  }
  // Round robin, one batch per table per database per round, so a budget that runs out
  // leaves every database equally far along rather than one untouched.
  let pending = shards.flatMap(({ binding, db }) => [
    { binding, table: "sessions" as const, purge: (limit: number) => purgeSessions(db, at, limit) },
    { binding, table: "events" as const, purge: (limit: number) => purgeEvents(db, retentionCutoff, limit) },
    {
      binding,
      table: "receivedSets" as const,
      purge: (limit: number) => purgeInboundSets(db, inboundCutoff, limit),
    },
  ]);
  while (pending.length > 0) {
    const round = pending.slice(0, room());
    if (round.length === 0) {
      result.complete = false;
      break;
    }
    const deleted = await Promise.allSettled(round.map((task) => task.purge(PURGE_BATCH_SIZE)));
    const full = [];
    for (const [index, task] of round.entries()) {
      const outcome = deleted[index] as PromiseSettledResult<number>;
      if (outcome.status === "rejected") {
        failed(task.binding, outcome.reason);
        continue;
      }
      result[task.table] += outcome.value;
      // A full batch may have left more behind; a short one emptied its table.
      if (outcome.value === PURGE_BATCH_SIZE) full.push(task);
    }
    pending = [...pending.slice(round.length), ...full];
  }
  result.subrequests = subrequests;
  // Through console.log whatever the level, as this line has always been written.
  logLine(result.failed.length > 0 ? "warn" : "info", "purge", result, "log");
  return result;
}
