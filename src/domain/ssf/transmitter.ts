import { ConfigError } from "../config.ts";
import { isLoopback } from "../ip.ts";
import { type JwsAlgorithm, type PublicKey, publicKeyOf, signJws, thumbprint } from "../jws.ts";
import { DELIVERY_URNS, STREAMS_PATH } from "./streams.ts";

// This service as a Shared Signals transmitter (OpenID SSF 1.0): who it is (SSF_ISSUER) and
// the keys its Security Event Tokens are signed with (the secret SSF_SIGNING_KEYS). Without
// an issuer the transmitter is off and its paths answer 404.
//
// SSF_SIGNING_KEYS is a JSON array of private JWKs, newest first. The first signs; each of the
// others is a key rotated out, still published until its `exp` (epoch seconds) so that a
// receiver holding a SET signed before the rotation, or a cached key set, can still verify.
// `npm run ssf:keys` makes a key set and rotates it.

/** The discovery document's path (SSF 1.0 §"Transmitter Configuration Discovery"). */
export const CONFIGURATION_PATH = "/.well-known/ssf-configuration";
export const JWKS_PATH = "/ssf/jwks.json";
/**
 * Caches may keep the discovery documents this long; a key rotated out must stay published
 * longer (`npm run ssf:keys -- rotate --overlap`), or a cached key set could lack a live key.
 */
export const DISCOVERY_MAX_AGE_SECONDS = 300;

/** A public signing key as the key set publishes it (RFC 7517). */
export type PublishedKey = PublicKey & { kid: string; alg: JwsAlgorithm; use: "sig" };

export interface SigningKey {
  published: PublishedKey;
  /** Null for the signing key; else the end of its overlap (epoch seconds). */
  exp: number | null;
}

export interface Transmitter {
  /** `https://host` (or `http://` on a loopback host, for development), no path. */
  issuer: string;
  /** Newest first; the first signs. */
  keys: SigningKey[];
  /** The first key's private JWK. */
  signer: JsonWebKey & { kid: string };
  /** How long a SET waits for its stream (polled, acknowledged or pushed) before it is dropped. */
  retentionDays: number;
}

export interface TransmitterVars {
  SSF_ISSUER?: string;
  SSF_SIGNING_KEYS?: string;
  SSF_SET_RETENTION_DAYS?: string;
}

const DEFAULT_RETENTION_DAYS = 7;

function retentionDaysOf(value: string | undefined): number {
  const days = value === undefined || value === "" ? DEFAULT_RETENTION_DAYS : Number(value);
  if (!Number.isSafeInteger(days) || days < 1 || days > 365)
    throw new ConfigError("SSF_SET_RETENTION_DAYS must be an integer from 1 to 365");
  return days;
}

const B64 = /^[A-Za-z0-9_-]+$/;

function issuerOf(value: string): string {
  const url = URL.parse(value);
  const loopback = url !== null && isLoopback(url.hostname);
  if (!url || !(url.protocol === "https:" || (url.protocol === "http:" && loopback)))
    throw new ConfigError("SSF_ISSUER must be an https origin (http only on a loopback host)");
  // The worker answers at its host's root: an issuer with a path would name documents it does not serve.
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "")
    throw new ConfigError("SSF_ISSUER must be an origin: no path, query, fragment or credentials");
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

function signingKeysOf(text: string): Pick<Transmitter, "keys" | "signer"> {
  const invalid = () =>
    new ConfigError(
      "SSF_SIGNING_KEYS must be a JSON array of private ES256 (P-256) or RS256 (2048-4096 bit) JWKs, newest first, each with a unique kid; only the first without exp",
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

// Read on every request (the outbox asks whether streams are configured): parsed once per
// isolate for the values last seen, as SHARDS is.
let lastRead: { vars: string; transmitter: Transmitter } | null = null;

/**
 * The transmitter the vars describe, null when SSF_ISSUER is empty. Throws a ConfigError that
 * names the var and its rule, never a value.
 */
export function readTransmitter(vars: TransmitterVars): Transmitter | null {
  if (!vars.SSF_ISSUER) return null;
  const key = JSON.stringify([vars.SSF_ISSUER, vars.SSF_SIGNING_KEYS, vars.SSF_SET_RETENTION_DAYS]);
  if (lastRead?.vars === key) return lastRead.transmitter;
  const issuer = issuerOf(vars.SSF_ISSUER);
  if (!vars.SSF_SIGNING_KEYS) throw new ConfigError("SSF_SIGNING_KEYS must be set when SSF_ISSUER is");
  const transmitter = {
    issuer,
    ...signingKeysOf(vars.SSF_SIGNING_KEYS),
    retentionDays: retentionDaysOf(vars.SSF_SET_RETENTION_DAYS),
  };
  lastRead = { vars: key, transmitter };
  return transmitter;
}

/** The keys a receiver may verify with at `nowSeconds`: the signing key and those still in their overlap. */
export function publishedKeys(transmitter: Transmitter, nowSeconds: number): PublishedKey[] {
  return transmitter.keys.filter((key) => key.exp === null || key.exp > nowSeconds).map((key) => key.published);
}

/** The transmitter configuration metadata (SSF 1.0): what a receiver discovers first. */
export function transmitterMetadata(transmitter: Transmitter) {
  const streams = `${transmitter.issuer}${STREAMS_PATH}`;
  return {
    spec_version: "1_0",
    issuer: transmitter.issuer,
    jwks_uri: `${transmitter.issuer}${JWKS_PATH}`,
    delivery_methods_supported: [DELIVERY_URNS.push, DELIVERY_URNS.poll],
    configuration_endpoint: streams,
    status_endpoint: `${streams}/status`,
    add_subject_endpoint: `${streams}/subjects/add`,
    remove_subject_endpoint: `${streams}/subjects/remove`,
    verification_endpoint: `${streams}/verify`,
    // Operator-issued bearer credentials (`npm run ssf:receivers`), sent as RFC 6750 says.
    authorization_schemes: [{ spec_urn: "urn:ietf:rfc:6750" }],
  };
}

/** RFC 7638 thumbprint of a key's public half: the `kid` `npm run ssf:keys` gives a new key. */
export async function keyId(jwk: Record<string, unknown>): Promise<string> {
  const half = publicHalf(jwk);
  if (!half) throw new Error("not an ES256 or RS256 private key");
  return thumbprint(half.key);
}

/**
 * Signs a SET for a receiver (RFC 8417, SSF 1.0 §4): the stored claims plus the issuer, the
 * receiver's audience and the time it is sent. Explicitly typed `secevent+jwt`; never an `exp`.
 */
export function signSet(
  transmitter: Transmitter,
  audience: string,
  claims: Record<string, unknown>,
  at: Date,
): Promise<string> {
  return signJws(
    { iss: transmitter.issuer, aud: audience, iat: Math.floor(at.getTime() / 1000), ...claims },
    transmitter.signer,
    { typ: "secevent+jwt" },
  );
}
