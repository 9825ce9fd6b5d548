import { now } from "./clock.ts";
import { openDatabase, purgeExpired } from "./db/queries.ts";

// Small batches keep each write short (D1 serialises writes); the cap bounds one run, and
// whatever is left goes in the next. Expired rows never authenticate, so lag is harmless.
export const PURGE_BATCH_SIZE = 500;
export const PURGE_MAX_BATCHES = 20;

export async function purgeExpiredSessions(env: Env): Promise<number> {
  const db = openDatabase(env.DB);
  const cutoff = now();
  let purged = 0;
  for (let batch = 0; batch < PURGE_MAX_BATCHES; batch++) {
    const deleted = await purgeExpired(db, cutoff, PURGE_BATCH_SIZE);
    purged += deleted;
    if (deleted < PURGE_BATCH_SIZE) break;
  }
  console.log(JSON.stringify({ level: "info", event: "sessions_purged", count: purged }));
  return purged;
}

export const scheduled: ExportedHandlerScheduledHandler<Env> = async (_controller, env) => {
  await purgeExpiredSessions(env);
};
