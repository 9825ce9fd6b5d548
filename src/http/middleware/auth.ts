import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { SessionToken } from "../../services/session-token.ts";
import { clearCarriedCookie } from "../cookie.ts";
import { type Credential, readCookieCredential, readCredential } from "../credentials.ts";
import { rejectCrossSite } from "../csrf.ts";
import { sessionInvalid, unauthorized } from "../errors.ts";
import type { ScopedEnv } from "./scope.ts";

// How each operation turns a credential into `c.var.token` (its proof, and the bucket and
// database its id names) or an error. Whether the token is live is decided by the operation's own
// statement on that database, so it costs no extra round trip.

/** What the middleware below set: the caller's token (device binding's routes set it too, for the request log). */
export type TokenVariables = { token: SessionToken };

/** A handler behind `requireToken` or `requireBearerOrCookie`, both run behind `withScope`. */
export type TokenEnv = ScopedEnv & { Variables: TokenVariables };

/** Bearer, or the session cookie: a cookie request from another site is refused before anything else. */
async function sameSiteCredential<E extends ScopedEnv>(c: Context<E>): Promise<Credential> {
  const credential = await readCredential(c);
  if (credential.kind !== "none" && credential.source === "cookie") rejectCrossSite(c);
  return credential;
}

/**
 * GET /auth/sessions, DELETE /auth/sessions/:id and GET /auth/events: Bearer, or the session
 * cookie from the same site, the one way a device-bound browser can call them (its token proves
 * nothing as Bearer). Every refusal is the contract's 401 invalid_token, whichever carried the
 * token, and none clears the cookie: a live bound session whose bound cookie lapsed gets this
 * 401 too, and must not be signed out by it.
 */
export const requireToken = createMiddleware<TokenEnv>(async (c, next) => {
  const credential = await sameSiteCredential(c);
  // RFC 6750: no error code when no token was offered (none, another scheme, an empty Bearer);
  // a session cookie, even empty or sent twice, was offered, and is counted as the logouts count it.
  if (credential.kind === "none") throw unauthorized("invalid_token", false);
  if (credential.kind === "malformed")
    throw unauthorized("invalid_token", credential.presented || credential.source === "cookie");
  c.set("token", credential);
  await next();
});

/**
 * POST /auth/dbsc/registration: the session cookie alone, from the same site (a DBSC browser's
 * own call; an Authorization header is not looked at). No cookie is 401 token_required, a
 * malformed one 401 invalid_token; neither clears it.
 */
export const requireSessionCookie = createMiddleware<TokenEnv>(async (c, next) => {
  const credential = await readCookieCredential(c);
  if (credential.kind !== "none") rejectCrossSite(c);
  if (credential.kind === "none") throw unauthorized("token_required", false);
  if (credential.kind === "malformed") throw unauthorized("invalid_token", true);
  c.set("token", credential);
  await next();
});

/** POST and DELETE /auth/logout: Bearer, or the session cookie from the same site. */
export const requireBearerOrCookie = createMiddleware<TokenEnv>(async (c, next) => {
  const credential = await sameSiteCredential(c);
  if (credential.kind === "none") throw unauthorized("token_required", false);
  if (credential.kind === "malformed") {
    clearCarriedCookie(c);
    throw sessionInvalid();
  }
  c.set("token", credential);
  await next();
});
