import { logFailure } from "../services/failure-log.ts";
import { outletsOf } from "../services/outbox.ts";
import { PURGE_BUDGET, purge } from "../services/purge.ts";
import { deliverPending } from "../services/resend.ts";
import { openScope } from "../services/scope.ts";

/** wrangler.toml `[triggers]`: the purge hourly; every minute, what is pending or due to be pushed. */
export const PUSH_CRON = "* * * * *";

export const scheduled: ExportedHandlerScheduledHandler<Env> = async (controller, env) => {
  const job = controller.cron === PUSH_CRON ? "delivery" : "purge";
  try {
    if (job === "delivery") {
      const { shards } = openScope(env);
      const databases = shards.all().map((shard) => shard.db);
      await deliverPending(outletsOf(env, shards), databases, new Date(controller.scheduledTime));
      return;
    }
    // The purge starts at the hour's database.
    await purge(env, PURGE_BUDGET, Math.floor(controller.scheduledTime / 3_600_000));
  } catch (error) {
    // Its line, as any failure's; then the invocation fails, as Cloudflare shows it, and the
    // next run (a minute, an hour) does the work again: no cron invocation is retried.
    logFailure(error, { cron: job }, crypto.randomUUID());
    throw error;
  }
};
