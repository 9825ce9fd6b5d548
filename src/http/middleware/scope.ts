import { createMiddleware } from "hono/factory";
import { clientContext } from "../../domain/client-context.ts";
import { normalizeIp } from "../../domain/ip.ts";
import { openScope, type Scope } from "../../services/scope.ts";
import type { AppEnv } from "../app-env.ts";

/** What `withScope` sets: config, the instant, the databases and the outbox of this request. */
export type ScopeVariables = { scope: Scope };

/** A handler behind `withScope`: an operation's (`/auth/*`, the streams, the inbound SETs). */
export type ScopedEnv = AppEnv & { Variables: ScopeVariables };

/**
 * Opens the request's scope (src/services/scope.ts): config, the instant, the client's IP, the
 * deployment's databases (each metered, with one retry on transient errors), the outbox,
 * which sends after the response, and the client's context (browser, OS, country, ASN, place). Which database a request uses is known only once its
 * credential is read (src/http/credentials.ts).
 */
export const withScope = createMiddleware<ScopedEnv>(async (c, next) => {
  // Read once: each read of request.cf builds the object anew.
  const cf = c.req.raw.cf;
  c.set(
    "scope",
    openScope(c.env, {
      waitUntil: (promise) => c.executionCtx.waitUntil(promise),
      clientIp: normalizeIp(c.req.header("CF-Connecting-IP")),
      // Cloudflare's view of the client's network and place (request.cf); absent outside Cloudflare's edge.
      context: clientContext({
        userAgent: c.req.header("User-Agent"),
        country: cf?.country,
        asn: cf?.asn,
        latitude: cf?.latitude,
        longitude: cf?.longitude,
      }),
    }),
  );
  await next();
});
