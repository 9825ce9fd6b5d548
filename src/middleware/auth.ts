import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../context.ts";
import { clearSessionCookie, readSessionCookie } from "../cookie.ts";
import { readCredential } from "../credentials.ts";
import { rejectCrossSite } from "../csrf.ts";
import { ApiError, unauthorized } from "../errors.ts";

// How each operation turns a credential into `c.var.proof` or an error. Whether the token
// is live is decided by the operation's own statement, so it costs no extra round trip.

/** GET /auth/sessions and DELETE /auth/sessions/:id: Bearer only. */
export const requireBearer = createMiddleware<AppEnv>(async (c, next) => {
  const credential = await readCredential(c, false);
  if (credential.kind !== "token") throw unauthorized("invalid_token", credential.kind === "malformed");
  c.set("proof", credential.proof);
  await next();
});

/** POST and DELETE /auth/logout: Bearer, or the session cookie from the same site. */
export const requireBearerOrCookie = createMiddleware<AppEnv>(async (c, next) => {
  const credential = await readCredential(c, true);
  if (credential.kind !== "none" && credential.source === "cookie") rejectCrossSite(c);
  const { cookieName } = c.var.config;
  // A client that asked to log out must not keep the cookie, whatever the answer.
  if (readSessionCookie(c, cookieName) !== undefined) clearSessionCookie(c, cookieName);
  if (credential.kind === "none") throw unauthorized("token_required", false);
  if (credential.kind === "malformed") throw new ApiError(400, "session_invalid");
  c.set("proof", credential.proof);
  await next();
});
