import type { Context } from "hono";
import { boundCookieName, cookieValue, setCookie } from "../domain/cookie-header.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

// The session cookie as the HTTP app deals in it: read from its request, set and cleared on its
// answer, with the one Set-Cookie value of src/domain/cookie-header.ts.

/** The session cookie's value, by src/domain/cookie-header.ts `cookieValue`'s rule. */
export function readSessionCookie(c: Context, name: string): string | null | undefined {
  return cookieValue(c.req.header("Cookie"), name);
}

function appendSetCookie(c: Context, name: string, value: string, maxAgeSeconds: number): void {
  c.header("Set-Cookie", setCookie(name, value, maxAgeSeconds), { append: true });
}

export function clearSessionCookie<E extends ScopedEnv>(c: Context<E>): void {
  appendSetCookie(c, c.var.scope.config.cookieName, "", 0);
}

/**
 * The bound cookie (src/domain/cookie-header.ts) carries the session cookie's attributes: the
 * browser checks them against the session instructions before it trusts it is the one to keep alive.
 */
export function setBoundCookie<E extends ScopedEnv>(c: Context<E>, secret: string): void {
  const { cookieName, boundCookieSeconds } = c.var.scope.config;
  appendSetCookie(c, boundCookieName(cookieName), secret, boundCookieSeconds);
}

export function clearBoundCookie<E extends ScopedEnv>(c: Context<E>): void {
  appendSetCookie(c, boundCookieName(c.var.scope.config.cookieName), "", 0);
}

/**
 * The logouts' rule: a client whose session ended, or whose cookie is dead, must not keep
 * the cookie, so it is cleared whenever the request carried it, refusals included.
 */
export function clearCarriedCookie<E extends ScopedEnv>(c: Context<E>): void {
  if (readSessionCookie(c, c.var.scope.config.cookieName) !== undefined) clearSessionCookie(c);
}
