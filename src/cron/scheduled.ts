import { PURGE_BUDGET, purge } from "../services/purge.ts";

// The hourly cron (wrangler.toml `[triggers]`): the purge, starting at the hour's database.
export const scheduled: ExportedHandlerScheduledHandler<Env> = async (controller, env) => {
  await purge(env, PURGE_BUDGET, Math.floor(controller.scheduledTime / 3_600_000));
};
