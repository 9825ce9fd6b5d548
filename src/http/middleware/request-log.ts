import { createMiddleware } from "hono/factory";
import { routePath } from "hono/route";
import { logLine } from "../../domain/log.ts";
import type { AppEnv } from "../app-env.ts";
import type { TokenVariables } from "./auth.ts";
import type { ScopeVariables } from "./scope.ts";

/** Outermost, the log sees every request: one may end before it has a scope (a 404, /openapi.json) or a token. */
type LoggedEnv = AppEnv & { Variables: Partial<ScopeVariables & TokenVariables> };

/**
 * One JSON line for an answer that needs an operator's eye: more D1 round trips than its
 * databases needed. Ordinary answers write nothing: Workers Logs already keep an invocation
 * log of every request (method, URL, status, duration, outcome), and a line per request cost a
 * third of the worker's throughput. Nor does a 5xx: its one line is its failure's, written by
 * `writeError`. Only fixed fields: the route pattern (never the raw path, which a client could
 * fill with anything), never a header, token or hash.
 */
export const requestLog = createMiddleware<LoggedEnv>(async (c, next) => {
  const started = performance.now();
  await next();
  const { status } = c.res;
  // Every operation answers from one round trip per database it asks; more means a transient
  // D1 error was retried, or the user's bucket was moved to a database the deployed SHARDS does
  // not name yet.
  if (status >= 500 || (c.var.scope?.extraRoundTrips() ?? 0) === 0) return;
  const route = routePath(c, -1);
  // Through console.log, as this line has always been written.
  logLine(
    "warn",
    "request",
    {
      method: c.req.method,
      route: route.endsWith("*") ? null : route,
      status,
      duration_ms: Math.round(performance.now() - started),
      // Every 2xx under /auth/ proved its token live, so this id is the caller's own.
      session_id: status < 300 ? (c.var.token?.proof.id ?? null) : null,
      d1_round_trips: c.var.scope?.roundTrips() ?? 0,
    },
    "log",
  );
});
