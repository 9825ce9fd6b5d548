import { createMiddleware } from "hono/factory";
import { routePath } from "hono/route";
import type { AppEnv } from "../context.ts";

/**
 * One JSON line per request. Only fixed fields: the route pattern (never the raw path,
 * which a client could fill with anything), never a header, token or hash.
 */
export const requestLog = createMiddleware<AppEnv>(async (c, next) => {
  const started = performance.now();
  await next();
  const route = routePath(c, -1);
  const { status } = c.res;
  console.log(
    JSON.stringify({
      level: status >= 500 ? "error" : "info",
      event: "request",
      method: c.req.method,
      route: route.endsWith("*") ? null : route,
      status,
      duration_ms: Math.round(performance.now() - started),
      // Every 2xx under /auth/ proved its token live, so this id is the caller's own.
      session_id: status < 300 ? (c.var.proof?.id ?? null) : null,
      d1_round_trips: c.var.roundTrips?.() ?? 0,
    }),
  );
});
