import { createMiddleware } from "hono/factory";
import { meterD1 } from "../../db/d1.ts";
import { openShards } from "../../db/shards.ts";
import { instant } from "../../domain/clock.ts";
import { readConfig } from "../../domain/config.ts";
import { normalizeIp } from "../../domain/ip.ts";
import { outboxFor, outletsOf } from "../../services/outbox.ts";
import type { AppEnv } from "../context.ts";

/**
 * What every handler reads: parsed config, the request's instant, the client's IP, and
 * the deployment's databases (each metered, with one retry on transient errors). Which
 * database a request uses is known only once its credential is read (src/http/credentials.ts).
 */
export const withContext = createMiddleware<AppEnv>(async (c, next) => {
  const meters: (() => number)[] = [];
  const config = readConfig(c.env);
  c.set("config", config);
  c.set("at", instant(config));
  c.set("clientIp", normalizeIp(c.req.header("CF-Connecting-IP")));
  const shards = openShards(c.env, (d1) => {
    const meter = meterD1(d1);
    meters.push(meter.roundTrips);
    return meter.db;
  });
  c.set("shards", shards);
  c.set("roundTrips", () => meters.reduce((sum, roundTrips) => sum + roundTrips(), 0));
  c.set(
    "outbox",
    outboxFor(outletsOf(c.env, shards), (promise) => c.executionCtx.waitUntil(promise)),
  );
  await next();
});
