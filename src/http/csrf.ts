import type { Context } from "hono";
import { ApiError } from "./errors.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

/**
 * Refuses a cookie-authenticated request that the browser says comes from another site.
 * Only cookie requests need it: browsers never attach a Bearer token on their own.
 */
export function rejectCrossSite<E extends ScopedEnv>(c: Context<E>): void {
  if (c.req.header("Sec-Fetch-Site") === "cross-site") throw new ApiError(403, "cross_site_request");
  const origin = c.req.header("Origin");
  if (origin === undefined || origin === new URL(c.req.url).origin) return;
  if (!c.var.scope.config.allowedOrigins.has(origin)) throw new ApiError(403, "cross_site_request");
}
