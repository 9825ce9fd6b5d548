import { createMiddleware } from "hono/factory";
import { secureHeaders } from "hono/secure-headers";
import type { AppEnv } from "./context.ts";
import { ApiError, writeError } from "./errors.ts";
import { Hono } from "./hono.ts";
import { withContext } from "./middleware/context.ts";
import { corsForAllowedOrigins } from "./middleware/cors.ts";
import { inputBounds } from "./middleware/input-bounds.ts";
import { requestLog } from "./middleware/request-log.ts";
import { limitFailedAuthentication } from "./rate-limit.ts";
import { eventsRoutes } from "./routes/events.ts";
import { logoutRoutes } from "./routes/logout.ts";
import { sessionsRoutes } from "./routes/sessions.ts";

// Session data must never sit in a shared or browser cache, errors included.
const noStore = createMiddleware(async (c, next) => {
  await next();
  c.header("Cache-Control", "no-store");
});

// A JSON API: nothing may be framed, run or loaded from its responses.
const apiSecureHeaders = secureHeaders({
  contentSecurityPolicy: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
  xFrameOptions: "DENY",
});

// Outermost first: every response, errors included, passes back out through the log,
// the security headers and no-store.
export const app = new Hono<AppEnv>()
  .use(requestLog)
  .use(apiSecureHeaders)
  .use("/auth/*", noStore)
  .use(inputBounds)
  // Only the operations need config, the instant and a database; a 404 pays for none of it.
  .use("/auth/*", withContext)
  .use("/auth/*", corsForAllowedOrigins)
  .route("/auth/sessions", sessionsRoutes)
  .route("/auth/logout", logoutRoutes)
  .route("/auth/events", eventsRoutes)
  // Returned, not thrown: a throw here would skip the middleware above on its way out.
  .notFound((c) => writeError(c, new ApiError(404, "not_found")))
  .onError(async (error, c) => writeError(c, await limitFailedAuthentication(c, error)));

export type AppType = typeof app;
