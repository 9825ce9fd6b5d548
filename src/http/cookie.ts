import type { Context } from "hono";
import { deleteCookie } from "hono/cookie";
import { serialize } from "hono/utils/cookie";
import { boundCookieName, cookieValue } from "../domain/cookie-header.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

// The session cookie's one definition, for both doors that deal in it: the HTTP app sets,
// reads and clears it; the RPC reads the Cookie header a login flow passes on and answers it
// with ready Set-Cookie values (src/http/login-response.ts).

// The attributes the session cookie is set with; clearing must repeat them exactly,
// and the `__Host-` prefix requires Secure, Path=/ and no Domain.
const ATTRIBUTES = { path: "/", secure: true, httpOnly: true, sameSite: "Lax" } as const;

/** The session cookie's value, by src/domain/cookie-header.ts `cookieValue`'s rule. */
export function readSessionCookie(c: Context, name: string): string | null | undefined {
  return cookieValue(c.req.header("Cookie"), name);
}

/** A ready `Set-Cookie` value for the login response that issued `token`. */
export function sessionCookie(name: string, token: string, maxAgeSeconds: number): string {
  return serialize(name, token, { ...ATTRIBUTES, maxAge: maxAgeSeconds });
}

export function clearSessionCookie<E extends ScopedEnv>(c: Context<E>): void {
  deleteCookie(c, c.var.scope.config.cookieName, ATTRIBUTES);
}

/**
 * The bound cookie (src/domain/cookie-header.ts) carries the session cookie's attributes: the
 * browser checks them against the session instructions before it trusts it is the one to keep alive.
 */
export function setBoundCookie<E extends ScopedEnv>(c: Context<E>, secret: string): void {
  const { cookieName, boundCookieSeconds } = c.var.scope.config;
  c.header(
    "Set-Cookie",
    serialize(boundCookieName(cookieName), secret, { ...ATTRIBUTES, maxAge: boundCookieSeconds }),
    {
      append: true,
    },
  );
}

export function clearBoundCookie<E extends ScopedEnv>(c: Context<E>): void {
  deleteCookie(c, boundCookieName(c.var.scope.config.cookieName), ATTRIBUTES);
}

/**
 * The logouts' rule: a client whose session ended, or whose cookie is dead, must not keep
 * the cookie, so it is cleared whenever the request carried it, refusals included.
 */
export function clearCarriedCookie<E extends ScopedEnv>(c: Context<E>): void {
  if (readSessionCookie(c, c.var.scope.config.cookieName) !== undefined) clearSessionCookie(c);
}
