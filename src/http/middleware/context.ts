import { createMiddleware } from "hono/factory";
import { normalizeIp } from "../../domain/ip.ts";
import { openScope } from "../../services/scope.ts";
import type { AppEnv } from "../context.ts";

/**
 * Opens the request's scope (src/services/scope.ts): config, the instant, the client's IP, the
 * deployment's databases (each metered, with one retry on transient errors) and the outbox,
 * which sends after the response. Which database a request uses is known only once its
 * credential is read (src/http/credentials.ts).
 */
export const withContext = createMiddleware<AppEnv>(async (c, next) => {
  c.set(
    "scope",
    openScope(c.env, {
      waitUntil: (promise) => c.executionCtx.waitUntil(promise),
      clientIp: normalizeIp(c.req.header("CF-Connecting-IP")),
    }),
  );
  await next();
});
