import type { Context } from "hono";
import type { ScopedEnv } from "./middleware/scope.ts";
import { crossSiteRequest } from "./refusals.ts";

/**
 * Refuses a cookie-authenticated request that the browser says comes from another site.
 * Only cookie requests need it: browsers never attach a Bearer token on their own.
 */
export function rejectCrossSite<E extends ScopedEnv>(c: Context<E>): void {
  if (c.req.header("Sec-Fetch-Site") === "cross-site") throw crossSiteRequest();
  const origin = c.req.header("Origin");
  if (origin === undefined || origin === new URL(c.req.url).origin) return;
  if (!c.var.scope.config.allowedOrigins.has(origin)) throw crossSiteRequest();
}
