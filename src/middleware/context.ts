import { createMiddleware } from "hono/factory";
import { instant } from "../clock.ts";
import { readConfig } from "../config.ts";
import type { AppEnv } from "../context.ts";
import { meterD1 } from "../db/binding.ts";
import { openDatabase } from "../db/queries.ts";
import { normalizeIp } from "../ip.ts";
import { outboxFor } from "../outbox.ts";

/**
 * What every handler reads: parsed config, the request's instant, the client's IP, and
 * the database handle (metered, with one retry on transient errors).
 */
export const withContext = createMiddleware<AppEnv>(async (c, next) => {
  const meter = meterD1(c.env.DB);
  const config = readConfig(c.env);
  c.set("config", config);
  c.set("at", instant(config));
  c.set("clientIp", normalizeIp(c.req.header("CF-Connecting-IP")));
  const db = openDatabase(meter.db);
  c.set("db", db);
  c.set("roundTrips", meter.roundTrips);
  c.set(
    "outbox",
    outboxFor(c.env.SESSION_EVENTS, db, (promise) => c.executionCtx.waitUntil(promise)),
  );
  await next();
});
