import { calculateJwkThumbprint } from "jose";
import { ConfigError } from "./config.ts";
import { isHttpsOrLoopback } from "./ip.ts";
import { type JwsAlgorithm, type PublicKey, publicKeyOf } from "./jws.ts";

// A key set this service signs with, as an operator configures it in a secret (the Shared Signals
// transmitter's SSF_SIGNING_KEYS, the access tokens' ACCESS_TOKEN_KEYS): a JSON array of private
// JWKs, newest first. The first signs; each of the others is a key rotated out, still published
// until its `exp` (epoch seconds), so that a verifier holding something signed before the
// rotation, or a cached key set, can still verify. `npm run ssf:keys` makes and rotates one.

/** A public signing key as a key set publishes it (RFC 7517). */
export type PublishedKey = PublicKey & { kid: string; alg: JwsAlgorithm; use: "sig" };

export interface SigningKey {
  published: PublishedKey;
  /** Null for the signing key; else the end of its overlap (epoch seconds). */
  exp: number | null;
}

export interface KeySet {
  /** Newest first; the first signs. */
  keys: SigningKey[];
  /** The first key's private JWK. */
  signer: JsonWebKey & { kid: string };
}

const B64 = /^[A-Za-z0-9_-]+$/;

/**
 * The `iss` of what a key set signs, from the var `name`: an https origin (`http` only on a
 * loopback host, for development), no path, since this worker answers at its host's root.
 */
export function issuerOf(name: string, value: string): string {
  const url = URL.parse(value);
  if (!url || !isHttpsOrLoopback(url))
    throw new ConfigError(`${name} must be an https origin (http only on a loopback host)`);
  // The worker answers at its host's root: an issuer with a path would name documents it does not serve.
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "")
    throw new ConfigError(`${name} must be an origin: no path, query, fragment or credentials`);
  return url.origin;
}

/** The public half of a private JWK, or null if it is not an ES256 or RS256 (2048-4096 bit) private key. */
function publicHalf(jwk: Record<string, unknown>): { key: PublicKey; alg: JwsAlgorithm } | null {
  const alg = jwk.kty === "EC" ? "ES256" : "RS256";
  const key = publicKeyOf(jwk, alg);
  const privateMembers = alg === "ES256" ? ["d"] : ["d", "p", "q", "dp", "dq", "qi"];
  // A P-256 private scalar is 32 bytes (43 base64url characters); RSA's members are bounded by the modulus.
  const isPrivate = privateMembers.every((member) => {
    const value = jwk[member];
    return (
      typeof value === "string" && B64.test(value) && (alg === "ES256" ? value.length === 43 : value.length <= 1024)
    );
  });
  return key && isPrivate ? { key, alg } : null;
}

/**
 * The key set a secret holds. Throws a ConfigError that names the var (`name`) and its rule,
 * never a value.
 */
export function keySetOf(name: string, text: string): KeySet {
  const invalid = () =>
    new ConfigError(
      `${name} must be a JSON array of private ES256 (P-256) or RS256 (2048-4096 bit) JWKs, newest first, each with a unique kid; only the first without exp`,
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw invalid();
  const keys: SigningKey[] = [];
  for (const [index, entry] of parsed.entries()) {
    if (typeof entry !== "object" || entry === null) throw invalid();
    const jwk = entry as Record<string, unknown>;
    const half = publicHalf(jwk);
    const { kid, exp } = jwk;
    const expOk = index === 0 ? exp === undefined : Number.isSafeInteger(exp);
    if (!half || typeof kid !== "string" || kid === "" || kid.length > 128 || !expOk) throw invalid();
    if (keys.some((key) => key.published.kid === kid)) throw invalid();
    keys.push({
      published: { ...half.key, kid, alg: half.alg, use: "sig" },
      exp: index === 0 ? null : (exp as number),
    });
  }
  return { keys, signer: parsed[0] as JsonWebKey & { kid: string } };
}

/** The keys a verifier may verify with at `nowSeconds`: the signing key and those still in their overlap. */
export function publishedKeys(keySet: KeySet, nowSeconds: number): PublishedKey[] {
  return keySet.keys.filter((key) => key.exp === null || key.exp > nowSeconds).map((key) => key.published);
}

/** RFC 7638 thumbprint of a key's public half: the `kid` `npm run ssf:keys` gives a new key. */
export async function keyId(jwk: Record<string, unknown>): Promise<string> {
  const half = publicHalf(jwk);
  if (!half) throw new Error("not an ES256 or RS256 private key");
  return calculateJwkThumbprint(half.key);
}
