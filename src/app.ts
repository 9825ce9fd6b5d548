import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { readConfig } from "./config.ts";
import type { AppEnv } from "./context.ts";
import { openDatabase } from "./db/queries.ts";
import { ApiError, writeError } from "./errors.ts";
import { logoutRoutes } from "./routes/logout.ts";
import { sessionsRoutes } from "./routes/sessions.ts";

const withContext = createMiddleware<AppEnv>(async (c, next) => {
  c.set("config", readConfig(c.env));
  c.set("db", openDatabase(c.env.DB));
  await next();
});

// Session data must never sit in a shared or browser cache, errors included.
const noStore = createMiddleware(async (c, next) => {
  await next();
  c.header("Cache-Control", "no-store");
});

export const app = new Hono<AppEnv>()
  .use(withContext)
  .use("/auth/*", noStore)
  .route("/auth/sessions", sessionsRoutes)
  .route("/auth/logout", logoutRoutes)
  // Returned, not thrown: a throw here would skip the middleware above on its way out.
  .notFound((c) => writeError(c, new ApiError(404, "not_found")))
  .onError((error, c) => writeError(c, error));

export type AppType = typeof app;
