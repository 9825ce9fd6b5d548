import { createMiddleware } from "hono/factory";
import { readConfig } from "../config.ts";
import type { AppEnv } from "../context.ts";
import { meterD1, retryTransientD1 } from "../db/binding.ts";
import { openDatabase } from "../db/queries.ts";

/** Parsed config and the request's database handle: metered, with one retry on transient errors. */
export const withContext = createMiddleware<AppEnv>(async (c, next) => {
  const meter = meterD1(c.env.DB);
  c.set("config", readConfig(c.env));
  c.set("db", openDatabase(retryTransientD1(meter.db)));
  c.set("roundTrips", meter.roundTrips);
  await next();
});
