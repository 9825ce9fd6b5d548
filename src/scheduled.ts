import { instant } from "./clock.ts";
import { readConfig } from "./config.ts";
import { openDatabase, purgeEvents, purgeSessions } from "./db/queries.ts";
import { resendPending } from "./outbox.ts";

// Small batches keep each write short (D1 serialises writes); the cap bounds one run, and
// whatever is left goes in the next. Dead rows never authenticate, so lag is harmless.
export const PURGE_BATCH_SIZE = 500;
export const PURGE_MAX_BATCHES = 20;

async function inBatches(purge: (limit: number) => Promise<number>): Promise<number> {
  let purged = 0;
  for (let batch = 0; batch < PURGE_MAX_BATCHES; batch++) {
    const deleted = await purge(PURGE_BATCH_SIZE);
    purged += deleted;
    if (deleted < PURGE_BATCH_SIZE) break;
  }
  return purged;
}

export async function purge(env: Env): Promise<{ resent: number; sessions: number; events: number }> {
  const config = readConfig(env);
  const db = openDatabase(env.DB);
  const at = instant(config);
  const retentionCutoff = new Date(at.now.getTime() - config.eventRetentionDays * 86_400_000);
  const result = {
    // First, so nothing pending is purged before the queue had its chance this run.
    resent: await resendPending(env.SESSION_EVENTS, db, at.now),
    sessions: await inBatches((limit) => purgeSessions(db, at, limit)),
    events: await inBatches((limit) => purgeEvents(db, retentionCutoff, limit)),
  };
  console.log(JSON.stringify({ level: "info", event: "purge", ...result }));
  return result;
}

export const scheduled: ExportedHandlerScheduledHandler<Env> = async (_controller, env) => {
  await purge(env);
};
