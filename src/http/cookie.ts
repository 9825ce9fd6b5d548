import type { Context } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { boundCookieName, cookieValue } from "../domain/cookie-header.ts";
import { hostCookieName, SESSION_COOKIE_ATTRIBUTES } from "../services/session-cookie.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

// The session cookie as the HTTP app deals in it: read from its request, set and cleared on its
// answer by hono's cookie helpers, with the attributes of src/services/session-cookie.ts.

/** The session cookie's value, by src/domain/cookie-header.ts `cookieValue`'s rule. */
export function readSessionCookie(c: Context, name: string): string | null | undefined {
  return cookieValue(c.req.header("Cookie"), name);
}

function clearCookie(c: Context, name: string): void {
  deleteCookie(c, hostCookieName(name), SESSION_COOKIE_ATTRIBUTES);
}

export function clearSessionCookie<E extends ScopedEnv>(c: Context<E>): void {
  clearCookie(c, c.var.scope.config.cookieName);
}

/**
 * The bound cookie (src/domain/cookie-header.ts) carries the session cookie's attributes: the
 * browser checks them against the session instructions before it trusts it is the one to keep alive.
 */
export function setBoundCookie<E extends ScopedEnv>(c: Context<E>, secret: string): void {
  const { cookieName, boundCookieSeconds } = c.var.scope.config;
  setCookie(c, hostCookieName(boundCookieName(cookieName)), secret, {
    ...SESSION_COOKIE_ATTRIBUTES,
    maxAge: boundCookieSeconds,
  });
}

export function clearBoundCookie<E extends ScopedEnv>(c: Context<E>): void {
  clearCookie(c, boundCookieName(c.var.scope.config.cookieName));
}

/**
 * The logouts' rule: a client whose session ended, or whose cookie is dead, must not keep
 * the cookie, so it is cleared whenever the request carried it, refusals included.
 */
export function clearCarriedCookie<E extends ScopedEnv>(c: Context<E>): void {
  if (readSessionCookie(c, c.var.scope.config.cookieName) !== undefined) clearSessionCookie(c);
}
