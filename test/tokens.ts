import { vi } from "vitest";
import { bearer, call, issue, newUser } from "./helpers.ts";

// Tokens in each state the contract's status table distinguishes.

/** Default region, bucket 0: a database in every deployment. */
const WELL_FORMED_UNKNOWN = `${"A".repeat(24)}.${"B".repeat(43)}`;

// An empty Authorization header is not listed: the runtime drops empty headers, so it
// arrives as no header at all (tested as such in bad-input.test.ts).
/** Authorization headers that offer no Bearer token at all (RFC 6750: no error code). */
export const NOT_BEARER: Record<string, string> = {
  "wrong scheme": `Basic ${btoa("alice:secret")}`,
  "scheme only": "Bearer",
};

/** Bearer tokens that cannot be a token of this service. */
export const MALFORMED_AUTHORIZATION: Record<string, string> = {
  "characters outside the alphabet": `Bearer ${"A".repeat(24)}.${"B".repeat(42)}!`,
  "longer than any token": `Bearer eu${WELL_FORMED_UNKNOWN}A`,
  "an id without a bucket": `Bearer ${"A".repeat(22)}.${"B".repeat(43)}`,
  "8 KB token": `Bearer ${"A".repeat(8192)}`,
  "non-ASCII (Latin-1) token": `Bearer ${"é".repeat(24)}.${"B".repeat(43)}`,
  "no dot": `Bearer ${"A".repeat(66)}`,
  "two tokens": `Bearer ${WELL_FORMED_UNKNOWN} ${WELL_FORMED_UNKNOWN}`,
};

export const MALFORMED_COOKIE: Record<string, string> = {
  empty: "",
  "characters outside the alphabet": `${"A".repeat(24)}.${"B".repeat(42)}%21`,
  "an id without a bucket": `${"A".repeat(22)}.${"B".repeat(43)}`,
  "8 KB value": "A".repeat(8192),
};

/** Well-formed tokens that must not authenticate, keyed by why. */
export async function deadTokens(): Promise<Record<string, string>> {
  const unknownSecret = await issue(newUser());
  const revoked = await issue(newUser());
  await call("POST", "/auth/logout", bearer(revoked.token));
  return {
    unknown: WELL_FORMED_UNKNOWN,
    "real id, wrong secret": `${unknownSecret.id}.${"B".repeat(43)}`,
    revoked: revoked.token,
  };
}

/**
 * A token whose session expired exactly now (expires_at == now): the clock is faked and
 * left at the expiry instant; the caller restores it with vi.useRealTimers().
 */
export async function tokenExpiringNow(): Promise<string> {
  vi.useFakeTimers({ toFake: ["Date"] });
  const start = Date.now();
  const session = await issue(newUser(), { ttlSeconds: 60 });
  vi.setSystemTime(start + 60_000);
  return session.token;
}
