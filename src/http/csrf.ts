import type { Context } from "hono";
import type { AppEnv } from "./app-env.ts";
import { ApiError } from "./errors.ts";

/**
 * Refuses a cookie-authenticated request that the browser says comes from another site.
 * Only cookie requests need it: browsers never attach a Bearer token on their own.
 */
export function rejectCrossSite(c: Context<AppEnv>): void {
  if (c.req.header("Sec-Fetch-Site") === "cross-site") throw new ApiError(403, "cross_site_request");
  const origin = c.req.header("Origin");
  if (origin === undefined || origin === new URL(c.req.url).origin) return;
  if (!c.var.scope.config.allowedOrigins.has(origin)) throw new ApiError(403, "cross_site_request");
}
