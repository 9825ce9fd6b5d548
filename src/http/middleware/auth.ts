import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context.ts";
import { clearCarriedCookie } from "../cookie.ts";
import { readCredential } from "../credentials.ts";
import { rejectCrossSite } from "../csrf.ts";
import { sessionInvalid, unauthorized } from "../errors.ts";

// How each operation turns a credential into `c.var.token` (its proof, and the bucket and
// database its id names) or an error. Whether the token is live is decided by the operation's own
// statement on that database, so it costs no extra round trip.

/** GET /auth/sessions, DELETE /auth/sessions/:id and GET /auth/events: Bearer only. */
export const requireBearer = createMiddleware<AppEnv>(async (c, next) => {
  const credential = await readCredential(c, false);
  // RFC 6750: no error code when no Bearer token was offered (none, another scheme, empty).
  if (credential.kind !== "token")
    throw unauthorized("invalid_token", credential.kind === "malformed" && credential.presented);
  c.set("token", credential);
  await next();
});

/** POST and DELETE /auth/logout: Bearer, or the session cookie from the same site. */
export const requireBearerOrCookie = createMiddleware<AppEnv>(async (c, next) => {
  const credential = await readCredential(c, true);
  if (credential.kind !== "none" && credential.source === "cookie") rejectCrossSite(c);
  if (credential.kind === "none") throw unauthorized("token_required", false);
  if (credential.kind === "malformed") {
    clearCarriedCookie(c);
    throw sessionInvalid();
  }
  c.set("token", credential);
  await next();
});
