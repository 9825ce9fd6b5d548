import type { Database } from "../db/client.ts";
import { pendingEvents } from "../db/outbox.ts";
import { logFailure, logOutboxFailure } from "./failure-log.ts";
import { deliver, type Outlets, push } from "./outbox.ts";

// What the outbox left pending (a write whose sending failed, or an operator's command, which
// sends nothing itself), sent again by the crons: every minute, and first in the hourly purge.

/** The request path sends its own events at once; the cron leaves them this long to do so. */
export const RESEND_AFTER_MS = 60_000;
export const RESEND_BATCH_SIZE = 100;
export const RESEND_MAX_BATCHES = 10;

/**
 * The pass over one database: sends what is still pending, oldest first, in bounded batches,
 * each started only while `mayStart()` says the run can afford one.
 */
async function resendPending(outlets: Outlets, db: Database, now: Date, mayStart: () => boolean): Promise<number> {
  const before = new Date(now.getTime() - RESEND_AFTER_MS);
  let sent = 0;
  for (let batch = 0; batch < RESEND_MAX_BATCHES && mayStart(); batch++) {
    const events = await pendingEvents(db, before, RESEND_BATCH_SIZE);
    if (events.length === 0) break;
    try {
      await deliver(outlets, db, events);
    } catch (error) {
      logOutboxFailure(error);
      break;
    }
    sent += events.length;
    if (events.length < RESEND_BATCH_SIZE) break;
  }
  return sent;
}

/**
 * Sends again what is pending on each database in turn; answers how many events went. A
 * database that fails is handed to `failed`, and the others go on.
 */
export async function resendEach<T extends { db: Database }>(
  outlets: Outlets | null,
  databases: readonly T[],
  now: Date,
  mayStart: () => boolean,
  failed: (database: T, error: unknown) => void,
): Promise<number> {
  if (!outlets) return 0;
  let sent = 0;
  for (const database of databases) {
    try {
      sent += await resendPending(outlets, database.db, now, mayStart);
    } catch (error) {
      failed(database, error);
    }
  }
  return sent;
}

/**
 * The minute cron: events still pending on any database (one that fails has its failure's line,
 * and the others go on), then the pushes now due (a failure is thrown, for the cron's line).
 */
export async function deliverPending(outlets: Outlets | null, databases: Database[], now: Date): Promise<void> {
  if (!outlets) return;
  const run = crypto.randomUUID();
  const once = receiversReadOnce(outlets, (error) => logFailure(error, { cron: "delivery" }, run));
  await resendEach(
    once,
    databases.map((db) => ({ db })),
    now,
    () => true,
    (_, error) => logFailure(error, { cron: "delivery" }, run),
  );
  await push(once, now);
}

/**
 * The upstreams that take pushes, read once for the run: a refused var is one failure, written
 * once, with the run's site, before anything is sent; every send that needs them then fails on
 * that same error (its events stay pending), which has its line already.
 */
function receiversReadOnce(outlets: Outlets, failed: (error: unknown) => void): Outlets {
  const { ssf } = outlets;
  if (!ssf) return outlets;
  try {
    const receivers = ssf.receivers();
    return { ...outlets, ssf: { ...ssf, receivers: () => receivers } };
  } catch (error) {
    failed(error);
    const refused = () => {
      throw error;
    };
    return { ...outlets, ssf: { ...ssf, receivers: refused } };
  }
}
