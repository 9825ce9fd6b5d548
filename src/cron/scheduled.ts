import { openShards } from "../db/shards.ts";
import { outletsOf, pushPending } from "../services/outbox.ts";
import { PURGE_BUDGET, purge } from "../services/purge.ts";

/** wrangler.toml `[triggers]`: the purge hourly; Shared Signals pushes that failed, every minute. */
export const PUSH_CRON = "* * * * *";

export const scheduled: ExportedHandlerScheduledHandler<Env> = async (controller, env) => {
  if (controller.cron === PUSH_CRON) {
    await pushPending(outletsOf(env, openShards(env)), new Date(controller.scheduledTime));
    return;
  }
  // The purge starts at the hour's database.
  await purge(env, PURGE_BUDGET, Math.floor(controller.scheduledTime / 3_600_000));
};
