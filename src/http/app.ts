import { createMiddleware } from "hono/factory";
import { methodNotAllowed } from "hono/method-not-allowed";
import { ACCESS_TOKEN_JWKS_PATH } from "../domain/access-token.ts";
import { STREAMS_PATH } from "../domain/ssf/streams.ts";
import { CONFIGURATION_PATH, JWKS_PATH } from "../domain/ssf/transmitter.ts";
import { INBOUND_PATH } from "../domain/upstreams/inbound.ts";
import { UPSTREAMS_PATH } from "../domain/upstreams/logout.ts";
import { requireAdminApi } from "./admin/auth.ts";
import type { AppEnv } from "./app-env.ts";
import { writeError } from "./errors.ts";
import { Hono } from "./hono.ts";
import { corsForAllowedOrigins } from "./middleware/cors.ts";
import { inputBounds } from "./middleware/input-bounds.ts";
import { requestLog } from "./middleware/request-log.ts";
import { withScope } from "./middleware/scope.ts";
import { securityHeaders } from "./middleware/security-headers.ts";
import { openApiDocument } from "./openapi.ts";
import { limitFailedAuthentication } from "./rate-limit.ts";
import { notFound, wrongMethod } from "./refusals.ts";
import { router } from "./route.ts";
import { ROUTES } from "./routes.ts";

// Session data must never sit in a shared or browser cache, errors included. Set on the answer
// itself: `c.header` after the handler copies the whole response first.
const noStore = createMiddleware(async (c, next) => {
  await next();
  c.res.headers.set("Cache-Control", "no-store");
});

const routes = new Hono<AppEnv>();

// A known path asked with a method it does not answer: 405, `Allow` built from the routes
// below (HEAD wherever GET is).
const refuseOtherMethods = methodNotAllowed({
  app: routes,
  onMethodNotAllowed: (_, methods) => {
    throw wrongMethod(methods);
  },
});

// Served by the worker, not as a static asset: an asset layer puts its router in front of
// every request, /auth/* included, which under `wrangler dev` cost the operations throughput;
// the document costs bundle size instead (both measured: BENCHMARKS.md, Reading).
let documentJson: string | undefined;

// Outermost first: every response, errors included, passes back out through the log,
// the security headers and no-store.
export const app = routes
  .use(requestLog)
  .use(securityHeaders)
  .use("/auth/*", noStore)
  .use(`${STREAMS_PATH}/*`, noStore)
  .use("/admin/*", noStore)
  .use(inputBounds)
  // The admin API exists only with keys: without, its paths are 404 before anything else.
  .use("/admin/*", requireAdminApi)
  // Only the operations need config, the instant and a database; a 404 pays for none of it.
  .use("/auth/*", withScope)
  .use("/admin/*", withScope)
  .use(`${STREAMS_PATH}/*`, withScope)
  .use("/auth/*", corsForAllowedOrigins)
  .use("/auth/*", refuseOtherMethods)
  .use("/openapi.json", refuseOtherMethods)
  .use(CONFIGURATION_PATH, refuseOtherMethods)
  .use(JWKS_PATH, refuseOtherMethods)
  .use(ACCESS_TOKEN_JWKS_PATH, refuseOtherMethods)
  .use(`${STREAMS_PATH}/*`, refuseOtherMethods)
  .use("/admin/*", refuseOtherMethods)
  .use(INBOUND_PATH, refuseOtherMethods)
  .use(`${UPSTREAMS_PATH}/*`, noStore)
  .use(`${UPSTREAMS_PATH}/*`, refuseOtherMethods)
  .get("/openapi.json", (c) => {
    // Public and cacheable, unlike /auth/: it changes only with a deployment.
    c.header("Cache-Control", "public, max-age=300");
    documentJson ??= JSON.stringify(openApiDocument);
    return c.body(documentJson, 200, { "Content-Type": "application/json" });
  })
  .route("/", router(ROUTES))
  // Returned, not thrown: a throw here would skip the middleware above on its way out.
  .notFound((c) => writeError(c, notFound()))
  .onError(async (error, c) => writeError(c, await limitFailedAuthentication(c, error)));

export type AppType = typeof app;
