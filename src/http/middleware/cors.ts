import { cors } from "hono/cors";
import { createMiddleware } from "hono/factory";
import type { ScopedEnv } from "./scope.ts";

// CORS exists only for the front-ends listed in ALLOWED_ORIGINS (none by default): they may
// send the cookie (credentials) and an Authorization header (which needs a preflight).
const allowListed = cors({
  origin: (origin) => origin,
  credentials: true,
  allowMethods: ["GET", "HEAD", "POST", "DELETE"],
  allowHeaders: ["Authorization"],
  exposeHeaders: ["WWW-Authenticate", "Retry-After"],
  maxAge: 600,
});

export const corsForAllowedOrigins = createMiddleware<ScopedEnv>(async (c, next) => {
  const origin = c.req.header("Origin");
  if (origin === undefined || !c.var.scope.config.allowedOrigins.has(origin)) return next();
  // Only the browser itself calls device binding, same-origin: no page may read its answers
  // (the DBSC draft's advice against leaking who is signed in).
  if (c.req.path.startsWith("/auth/dbsc/")) return next();
  return allowListed(c, next);
});
