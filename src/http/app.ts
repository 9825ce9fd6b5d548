import { createMiddleware } from "hono/factory";
import { methodNotAllowed } from "hono/method-not-allowed";
import type { AppEnv } from "./app-env.ts";
import { writeError } from "./errors.ts";
import { Hono } from "./hono.ts";
import { inputLimits } from "./middleware/input-limits.ts";
import { requestLog } from "./middleware/request-log.ts";
import { securityHeaders } from "./middleware/security-headers.ts";
import { limitFailedAuthentication } from "./rate-limit.ts";
import { notFound, wrongMethod } from "./refusals.ts";
import { mountsOf, router } from "./route.ts";
import { ROUTES } from "./routes.ts";

// Session data must never sit in a shared or browser cache, errors included. Set on the answer
// itself: `c.header` after the handler copies the whole response first.
const noStore = createMiddleware(async (c, next) => {
  await next();
  c.res.headers.set("Cache-Control", "no-store");
});

// The parts of the origin the routes' credentials name (src/http/route.ts's `Mount`): every
// request under one, routed or not, is no-store and runs the mount's own middleware (the admin
// API's gate, the scope, CORS) before routing.
const mounts = mountsOf(ROUTES);

// Outermost first: every response, errors included, passes back out through the log,
// the security headers and no-store.
const routes = new Hono<AppEnv>().use(requestLog).use(securityHeaders);
for (const { path } of mounts) routes.use(`${path}/*`, noStore);
routes.use(inputLimits);
for (const { path, use } of mounts) routes.use(`${path}/*`, ...use);

// A known path asked with a method it does not answer: 405, `Allow` built from the routes
// below (HEAD wherever GET is); any other path passes.
const refuseOtherMethods = methodNotAllowed({
  app: routes,
  onMethodNotAllowed: (_, methods) => {
    throw wrongMethod(methods);
  },
});

export const app = routes
  .use(refuseOtherMethods)
  .route("/", router(ROUTES))
  // Returned, not thrown: a throw here would skip the middleware above on its way out.
  .notFound((c) => writeError(c, notFound()))
  .onError(async (error, c) => writeError(c, await limitFailedAuthentication(c, error)));

export type AppType = typeof app;
