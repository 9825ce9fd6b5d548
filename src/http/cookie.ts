import type { Context } from "hono";
import { deleteCookie } from "hono/cookie";
import { serialize } from "hono/utils/cookie";
import { BOUND_SECRET } from "../domain/device-binding.ts";
import { hashSecret } from "../domain/token.ts";
import type { AppEnv } from "./context.ts";

// The session cookie's one definition, for both doors that deal in it: the HTTP app sets,
// reads and clears it; the RPC reads the Cookie header a login flow passes on and answers it
// with ready Set-Cookie values (src/rpc/create-session.ts).

// The attributes the session cookie is set with; clearing must repeat them exactly,
// and the `__Host-` prefix requires Secure, Path=/ and no Domain.
const ATTRIBUTES = { path: "/", secure: true, httpOnly: true, sameSite: "Lax" } as const;

/**
 * The value sent under `name`, raw: "" when sent empty, undefined when not sent, null when
 * sent more than once. A `__Host-` cookie is host-only with `Path=/`, so a browser holds one;
 * a second can only have been planted (e.g. `x=a,__Host-session=<attacker's token>` set from a
 * sibling subdomain, which browsers accept and send first), and then neither is trusted: the
 * logout refuses rather than end the sessions of whichever token came first.
 * Not hono's getCookie: it skips values outside the cookie-octet set (`a\b`, quotes) as if
 * they were absent, and misses a second Cookie header (joined with ", "); both must count
 * as a malformed session cookie, not as none.
 */
export function readSessionCookie(c: Context, name: string): string | null | undefined {
  return cookieValue(c.req.header("Cookie"), name);
}

/** The same rule on a raw `Cookie` header, as the RPC is given it. */
export function cookieValue(header: string | undefined, name: string): string | null | undefined {
  let value: string | null | undefined;
  for (const pair of (header ?? "").split(/[;,]/)) {
    const equals = pair.indexOf("=");
    if (equals === -1 || pair.slice(0, equals).trim() !== name) continue;
    if (value !== undefined) return null;
    value = pair.slice(equals + 1).trim();
  }
  return value;
}

/** A ready `Set-Cookie` value for the login response that issued `token`. */
export function sessionCookie(name: string, token: string, maxAgeSeconds: number): string {
  return serialize(name, token, { ...ATTRIBUTES, maxAge: maxAgeSeconds });
}

export function clearSessionCookie(c: Context<AppEnv>): void {
  deleteCookie(c, c.var.config.cookieName, ATTRIBUTES);
}

/**
 * The short-lived cookie of a device-bound session (src/domain/device-binding.ts), named after the
 * session cookie, with the same attributes: the browser checks them against the session
 * instructions before it trusts the cookie is the one it must keep alive.
 */
export function boundCookieName(sessionCookieName: string): string {
  return `${sessionCookieName}-bound`;
}

/**
 * SHA-256 of the bound cookie in a `Cookie` header, as compared with the session row; null
 * when there is none (or one this service cannot have set).
 */
export async function boundCookieHash(cookieHeader: string | undefined, cookieName: string): Promise<string | null> {
  const value = cookieValue(cookieHeader, boundCookieName(cookieName));
  return typeof value === "string" && BOUND_SECRET.test(value) ? hashSecret(value) : null;
}

export function setBoundCookie(c: Context<AppEnv>, secret: string): void {
  const { cookieName, boundCookieSeconds } = c.var.config;
  c.header(
    "Set-Cookie",
    serialize(boundCookieName(cookieName), secret, { ...ATTRIBUTES, maxAge: boundCookieSeconds }),
    {
      append: true,
    },
  );
}

export function clearBoundCookie(c: Context<AppEnv>): void {
  deleteCookie(c, boundCookieName(c.var.config.cookieName), ATTRIBUTES);
}

/**
 * The logouts' rule: a client whose session ended, or whose cookie is dead, must not keep
 * the cookie, so it is cleared whenever the request carried it, refusals included.
 */
export function clearCarriedCookie(c: Context<AppEnv>): void {
  if (readSessionCookie(c, c.var.config.cookieName) !== undefined) clearSessionCookie(c);
}
