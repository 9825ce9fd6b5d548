import { generateCookie } from "hono/cookie";
import type { CookieOptions } from "hono/utils/cookie";

// The session cookies' attributes, said once, for every entry point: the HTTP routes set and clear them
// with hono's setCookie and deleteCookie (src/http/cookie.ts), and a login flow is handed the
// Set-Cookie text hono's generateCookie writes with them (./login-response.ts).

/**
 * The attributes every session cookie is set and cleared with. `prefix: "host"` writes the
 * `__Host-` name, which browsers accept only with Secure, Path=/ and no Domain (hono adds them);
 * HttpOnly keeps it from scripts; Lax, from cross-site posts.
 */
export const SESSION_COOKIE_ATTRIBUTES = {
  prefix: "host",
  httpOnly: true,
  sameSite: "Lax",
} as const satisfies CookieOptions;

/**
 * The name hono's `prefix: "host"` writes `__Host-` before: the configured name without it (the
 * config refuses a name that does not start with it, src/domain/config.ts).
 */
export function hostCookieName(name: string): string {
  return name.slice("__Host-".length);
}

/** A ready `Set-Cookie` value: the cookie `name` holding `value` for `maxAgeSeconds`. */
export function sessionSetCookie(name: string, value: string, maxAgeSeconds: number): string {
  return generateCookie(hostCookieName(name), value, { ...SESSION_COOKIE_ATTRIBUTES, maxAge: maxAgeSeconds });
}
