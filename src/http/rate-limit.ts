import type { Context } from "hono";
import { logLine } from "../domain/log.ts";
import { Refused } from "../domain/refusal.ts";
import type { AppEnv } from "./app-env.ts";
import type { ScopeVariables } from "./middleware/scope.ts";
import { rateLimited } from "./refusals.ts";

// Wrangler's `simple` limiter period for AUTH_FAILURES, which Retry-After repeats.
const PERIOD_SECONDS = 60;

/**
 * Counts a refused token against the client's IP (Workers Rate Limiting binding); past the
 * limit the refusal becomes 429. Called on the way to writing an error, so only failures
 * are counted: a legitimate user's successful requests are never slowed, whatever anyone
 * else, even behind the same IP, sends. Called by `onError`, for any request: one refused
 * before its scope was opened has no client IP to count under.
 */
export async function limitFailedAuthentication<E extends AppEnv & { Variables: Partial<ScopeVariables> }>(
  c: Context<E>,
  error: unknown,
): Promise<unknown> {
  if (!(error instanceof Refused) || !error.authFailure) return error;
  try {
    const { success } = await c.env.AUTH_FAILURES.limit({ key: c.var.scope?.clientIp ?? "unknown" });
    if (success) return error;
  } catch (outage) {
    // A limiter outage must not turn a clear refusal into a 500: fail open, refusal stands,
    // and the line tells an operator that failures are going uncounted.
    logLine("warn", "rate_limiter_unavailable", { name: outage instanceof Error ? outage.name : "error" });
    return error;
  }
  return rateLimited(PERIOD_SECONDS);
}
