import { createMiddleware } from "hono/factory";

// The headers every response carries, errors included. A JSON API: nothing may be framed, run
// or loaded from its responses. HSTS for a year (the HSTS preload list's minimum) on every
// subdomain, so no cookie ever goes over HTTP. Fixed values, so a fixed list: these are
// hono/secure-headers' defaults with this API's CSP and HSTS, without its per-request
// option handling (its bundle cost: BENCHMARKS.md, Reading) and without the three that only
// act on a document a browser renders (Origin-Agent-Cluster, X-DNS-Prefetch-Control, IE8's
// X-Download-Options): these responses are JSON that nosniff and `default-src 'none'` keep
// from ever being one.
export const SECURITY_HEADERS: readonly (readonly [name: string, value: string])[] = [
  ["Content-Security-Policy", "default-src 'none'; base-uri 'none'; frame-ancestors 'none'"],
  ["Cross-Origin-Opener-Policy", "same-origin"],
  ["Cross-Origin-Resource-Policy", "same-origin"],
  ["Referrer-Policy", "no-referrer"],
  ["Strict-Transport-Security", "max-age=31536000; includeSubDomains"],
  ["X-Content-Type-Options", "nosniff"],
  ["X-Frame-Options", "DENY"],
  ["X-Permitted-Cross-Domain-Policies", "none"],
  ["X-XSS-Protection", "0"],
];

export const securityHeaders = createMiddleware(async function securityHeaders(c, next) {
  await next();
  for (const [name, value] of SECURITY_HEADERS) c.res.headers.set(name, value);
});
