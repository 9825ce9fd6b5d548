import type { CallerView } from "./caller-view.ts";
import { ConfigError, parsedOnce } from "./config.ts";
import { signJws } from "./jws.ts";
import type { SessionData } from "./session-data.ts";
import { issuerOf, type KeySet, keySetOf } from "./signing-keys.ts";
import { base64Url } from "./token.ts";

// Access tokens: short-lived JWTs (RFC 9068's profile) minted from a live session by
// `POST /auth/token`, for services that verify a caller on their own against the published key
// set instead of asking this service on every request. They cannot be revoked: a verifier learns
// that a session ended from the Shared Signals `session-revoked` event naming the token's `sid`
// (docs/access-tokens.md), and a verifier that does not listen trusts a token until its `exp`.
// Off until an operator sets ACCESS_TOKEN_KEYS (a key set as src/domain/signing-keys.ts reads it):
// the token route and the key set then answer 404.

/** Where verifiers fetch the public keys: the conventional path, outside `/auth/` (which is no-store). */
export const ACCESS_TOKEN_JWKS_PATH = "/.well-known/jwks.json";
/** Caches may keep the key set this long; a rotated-out key stays published longer (`npm run token:keys`). */
export const JWKS_MAX_AGE_SECONDS = 300;
/**
 * The default lifetime: how long a verifier that does not listen to Shared Signals may still
 * accept a token of a session that has ended, against one `POST /auth/token` per client per
 * lifetime. Two minutes: short enough that an ended session is gone everywhere within the time
 * a user takes to notice, long enough that a client refreshing a little before `exp` costs the
 * service one request every ~100 s.
 */
export const DEFAULT_ACCESS_TOKEN_TTL_SECONDS = 120;
/** "At most a few minutes": a longer lifetime would make a token a second, unrevocable session. */
export const MAX_ACCESS_TOKEN_TTL_SECONDS = 600;

export interface AccessTokenIssuer extends KeySet {
  /** `iss`: an https origin. */
  issuer: string;
  /** `aud`: the services the tokens are for, one or more. */
  audience: string[];
  ttlSeconds: number;
  /** The top-level keys of a session's application data its tokens carry as claims; [] none. */
  dataClaims: string[];
  /** The claim a member's token carries its organization's id in; null: none (the default). */
  organizationClaim: string | null;
}

export interface AccessTokenVars {
  ACCESS_TOKEN_KEYS?: string;
  ACCESS_TOKEN_ISSUER?: string;
  ACCESS_TOKEN_AUDIENCE?: string;
  ACCESS_TOKEN_TTL_SECONDS?: string;
  ACCESS_TOKEN_DATA_CLAIMS?: string;
  ACCESS_TOKEN_ORGANIZATION_CLAIM?: string;
}

/**
 * Claims a verifier reads as who the token is, for whom and when, which application data must
 * never stand in for: RFC 7519's registered claims, RFC 9068's and OpenID Connect's of an access
 * or ID token, RFC 8693's actor claims, RFC 7800's confirmation. Those this issuer sets
 * (`signAccessToken`) are among them.
 */
export const RESERVED_CLAIMS = [
  "iss",
  "sub",
  "aud",
  "exp",
  "nbf",
  "iat",
  "jti",
  "client_id",
  "scope",
  "auth_time",
  "acr",
  "amr",
  "sid",
  "azp",
  "nonce",
  "act",
  "may_act",
  "cnf",
] as const;

/** A data key as a claim name: 1 to 64 characters, none a space, comma or control character. */
const CLAIM_NAME = /^[^\s,\p{Cc}]{1,64}$/u;

function dataClaimsOf(value: string | undefined): string[] {
  const names = (value ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (names.some((name) => !CLAIM_NAME.test(name)))
    throw new ConfigError(
      "ACCESS_TOKEN_DATA_CLAIMS must list top-level keys of the session data, comma-separated (each 1 to 64 characters, no spaces)",
    );
  const reserved = names.filter((name) => (RESERVED_CLAIMS as readonly string[]).includes(name));
  if (reserved.length > 0)
    throw new ConfigError(
      `ACCESS_TOKEN_DATA_CLAIMS may not name a registered claim (${reserved.join(", ")}): session data never overrides ${RESERVED_CLAIMS.join(", ")}`,
    );
  return [...new Set(names)];
}

/** The organization's claim name: one that no registered claim or data claim has; "" or unset: none. */
function organizationClaimOf(value: string | undefined, dataClaims: string[]): string | null {
  const name = (value ?? "").trim();
  if (name === "") return null;
  if (!CLAIM_NAME.test(name) || (RESERVED_CLAIMS as readonly string[]).includes(name) || dataClaims.includes(name))
    throw new ConfigError(
      "ACCESS_TOKEN_ORGANIZATION_CLAIM must be empty or one claim name (1 to 64 characters, no spaces), neither a registered claim nor one of ACCESS_TOKEN_DATA_CLAIMS",
    );
  return name;
}

function audienceOf(value: string | undefined): string[] {
  const audience = (value ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (audience.length === 0 || audience.some((entry) => entry.length > 512 || /[\p{Cc}\s]/u.test(entry)))
    throw new ConfigError(
      "ACCESS_TOKEN_AUDIENCE must list the services the tokens are for, comma-separated (each a URI or a name, no spaces)",
    );
  return audience;
}

function ttlOf(value: string | undefined): number {
  const ttl = value === undefined || value === "" ? DEFAULT_ACCESS_TOKEN_TTL_SECONDS : Number(value);
  if (!Number.isSafeInteger(ttl) || ttl < 10 || ttl > MAX_ACCESS_TOKEN_TTL_SECONDS)
    throw new ConfigError(`ACCESS_TOKEN_TTL_SECONDS must be an integer from 10 to ${MAX_ACCESS_TOKEN_TTL_SECONDS}`);
  return ttl;
}

const keySetFrom = parsedOnce((text: string) => keySetOf("ACCESS_TOKEN_KEYS", text));

/**
 * The key set alone, null when ACCESS_TOKEN_KEYS is unset: what the published key set needs, so
 * that a mistake in another ACCESS_TOKEN_* var stops minting but never hides the keys that verify
 * the tokens already out.
 */
export function readAccessTokenKeys(vars: AccessTokenVars): KeySet | null {
  return vars.ACCESS_TOKEN_KEYS ? keySetFrom(vars.ACCESS_TOKEN_KEYS) : null;
}

const issuerFrom = parsedOnce(
  (
    keySet: KeySet,
    issuer: string | undefined,
    audience: string | undefined,
    ttl: string | undefined,
    dataClaims: string | undefined,
    organizationClaim: string | undefined,
  ): AccessTokenIssuer => {
    const data = dataClaimsOf(dataClaims);
    return {
      ...keySet,
      issuer: issuerOf("ACCESS_TOKEN_ISSUER", issuer ?? ""),
      audience: audienceOf(audience),
      ttlSeconds: ttlOf(ttl),
      dataClaims: data,
      organizationClaim: organizationClaimOf(organizationClaim, data),
    };
  },
);

/**
 * The access token issuer the vars describe, null when ACCESS_TOKEN_KEYS is unset (off). Throws
 * a ConfigError that names the var and its rule, never a value.
 */
export function readAccessTokenIssuer(vars: AccessTokenVars): AccessTokenIssuer | null {
  const keySet = readAccessTokenKeys(vars);
  if (!keySet) return null;
  return issuerFrom(
    keySet,
    vars.ACCESS_TOKEN_ISSUER,
    vars.ACCESS_TOKEN_AUDIENCE,
    vars.ACCESS_TOKEN_TTL_SECONDS,
    vars.ACCESS_TOKEN_DATA_CLAIMS,
    vars.ACCESS_TOKEN_ORGANIZATION_CLAIM,
  );
}

/** What an access token says of its session, beyond the issuer's own claims: the caller's view of it (./caller-view.ts). */
export type AccessTokenSubject = Pick<
  CallerView,
  | "sessionId"
  | "userId"
  | "expiresAt"
  | "authenticatedAt"
  | "factors"
  | "assuranceLevel"
  | "actor"
  | "data"
  | "organization"
>;

/** The members of `data` the issuer allows as claims, those present, in the order the operator listed them. */
function dataClaimsFor(issuer: AccessTokenIssuer, data: SessionData | undefined): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  if (data === undefined) return claims;
  for (const name of issuer.dataClaims) {
    const value = Object.hasOwn(data, name) ? data[name] : undefined;
    if (value !== undefined) claims[name] = value;
  }
  return claims;
}

/** An ISO time (the view's) in epoch seconds, as JWT's NumericDate. */
const secondsOf = (time: string | Date) => Math.floor(new Date(time).getTime() / 1000);

/**
 * A signed access token (RFC 9068 §2: `typ` `at+jwt`) for the session, and its lifetime in
 * seconds: never past the session's own end. The keys of the session's data the operator
 * allows (ACCESS_TOKEN_DATA_CLAIMS) are claims too, private ones (RFC 7519 §4.3), never one of
 * RESERVED_CLAIMS. No `client_id`: no OAuth client asks for it, the session's own holder does;
 * a verifier tells tokens of this issuer apart by `iss`, `aud` and `typ`.
 */
export async function signAccessToken(
  issuer: AccessTokenIssuer,
  subject: AccessTokenSubject,
  now: Date,
): Promise<{ token: string; expiresIn: number }> {
  const iat = secondsOf(now);
  const exp = Math.min(iat + issuer.ttlSeconds, secondsOf(subject.expiresAt));
  const amr = subject.factors.map((proof) => proof.factor);
  const claims = {
    // First, so the issuer's own claims come after them: the configuration never names one (RESERVED_CLAIMS).
    ...dataClaimsFor(issuer, subject.data),
    iss: issuer.issuer,
    sub: subject.userId,
    aud: issuer.audience.length === 1 ? issuer.audience[0] : issuer.audience,
    exp,
    iat,
    jti: base64Url(crypto.getRandomValues(new Uint8Array(16))),
    sid: subject.sessionId,
    auth_time: secondsOf(subject.authenticatedAt),
    ...(amr.length === 0 ? {} : { amr }),
    ...(subject.assuranceLevel === null ? {} : { acr: `aal${subject.assuranceLevel}` }),
    ...(subject.actor ? { act: { sub: subject.actor.sub } } : {}),
    // Opted in (ACCESS_TOKEN_ORGANIZATION_CLAIM), for a member's session alone.
    ...(issuer.organizationClaim && subject.organization !== null
      ? { [issuer.organizationClaim]: subject.organization }
      : {}),
  };
  return { token: await signJws(claims, issuer.signer, { typ: "at+jwt" }), expiresIn: exp - iat };
}
