import { BOUND_SECRET } from "./device-binding.ts";
import { InvalidInput } from "./invalid-input.ts";
import { hashSecret } from "./token.ts";

// The session cookies, the same for every entry point: a raw `Cookie` header read (the HTTP app's own
// request's, or the one a login flow passes on). Hono's cookie helpers write them
// (src/services/session-cookie.ts).

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

/**
 * The short-lived cookie of a device-bound session (src/domain/device-binding.ts), named after the
 * session cookie.
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

/** The `Cookie` header a login flow passed on (RPC, admin API), if any; anything but a string is InvalidInput. */
export function checkCookieHeader(cookie: unknown): string | undefined {
  if (cookie !== undefined && typeof cookie !== "string")
    throw new InvalidInput("cookie must be the request's Cookie header");
  return cookie;
}
