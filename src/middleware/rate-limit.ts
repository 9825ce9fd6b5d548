import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context.ts";
import { ApiError, writeError } from "../errors.ts";

// Wrangler's `simple` limiter period for AUTH_FAILURES, which Retry-After repeats.
const PERIOD_SECONDS = 60;

/**
 * Counts refused tokens per client IP (Workers Rate Limiting binding). Past the limit, a
 * refusal becomes 429. Only failures are counted, so a legitimate user's successful
 * requests are never slowed, whatever anyone else (even behind the same IP) sends.
 */
export const limitFailedAuthentications = createMiddleware<AppEnv>(async (c, next) => {
  await next();
  if (!(c.error instanceof ApiError) || !c.error.authFailure) return;
  const { success } = await c.env.AUTH_FAILURES.limit({ key: c.var.clientIp ?? "unknown" });
  if (success) return;
  // Reset first: assigning over a response would carry all its headers (the 401 challenge)
  // over. A cleared cookie is kept: the cookie is dead either way.
  const clearedCookies = c.res.headers.getSetCookie();
  c.res = undefined;
  c.res = writeError(c, new ApiError(429, "rate_limited", { headers: { "Retry-After": String(PERIOD_SECONDS) } }));
  for (const cookie of clearedCookies) c.res.headers.append("Set-Cookie", cookie);
});
