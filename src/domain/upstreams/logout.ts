import type { Jws } from "../jws.ts";
import { Refused } from "../refusal.ts";
import { audienceOf, isObject, timesFault, type Upstream } from "./config.ts";
import { isUpstreamId } from "./sign-in.ts";

// What an upstream's OpenID Connect routes accept, checked claim by claim (the signature is
// src/services/upstreams/logout.ts's): a back-channel logout token (OpenID Connect Back-Channel
// Logout 1.0, §2.4 and §2.6) and a global token revocation request (draft-parecki-oauth-global-
// token-revocation-06), authenticated by a JWT the upstream signs (RFC 7523, as Okta's Universal
// Logout does). Each route is per upstream: /upstreams/<name>/…

export const UPSTREAMS_PATH = "/upstreams";
const BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout";
/** A logout token or a revocation JWT is a few hundred bytes to a few KB: far more is not one. */
export const MAX_UPSTREAM_TOKEN_BYTES = 16_384;

/** The answers these routes give besides success, each with its status. */
export const UPSTREAM_ERRORS = {
  invalid_request: 400,
  invalid_token: 401,
  access_denied: 403,
  user_not_found: 404,
} as const;
export type UpstreamErrorCode = keyof typeof UPSTREAM_ERRORS;

/**
 * A request refused (OpenID Connect Back-Channel Logout §2.8, the global token revocation
 * draft's statuses): `{error, error_description}` in English, nothing ended; a 401 with its
 * challenge. The description is fixed text, never the token.
 */
export function upstreamRefused(error: UpstreamErrorCode, description: string): Refused {
  const status = UPSTREAM_ERRORS[error];
  const headers: Record<string, string> = { "Content-Language": "en" };
  if (status === 401) headers["WWW-Authenticate"] = 'Bearer error="invalid_token"';
  return new Refused(status, { error, error_description: description }, headers);
}

/** What a verified logout token or revocation asks: end the subject's sessions (or its `sid`'s only). */
export interface UpstreamEnding {
  jti: string;
  subject: string;
  /** Only the sessions of this upstream session; null: every session of the subject. */
  sid: string | null;
  /** When the upstream signed it: sessions issued after it are not the ones it speaks of. */
  issuedAt: Date;
}

/**
 * A JWS's `typ` as the media type it names, in lower case and without `application/` (RFC 7515
 * §4.1.9: `JWT` and `application/jwt` are one type; media types ignore case); null when absent,
 * "" when not a string.
 */
function typOf({ header }: Jws): string | null {
  if (header.typ === undefined) return null;
  const typ = typeof header.typ === "string" ? header.typ.toLowerCase() : "";
  return typ.startsWith("application/") ? typ.slice("application/".length) : typ;
}

/**
 * A logout token's `typ`, when present: `logout+jwt`, or the untyped `JWT` that Keycloak before
 * 25 and authentik before 2025.12 still send. Any other type is a token of another kind (a SET,
 * an access token) and refused; what keeps an ID token from passing for a logout token is the
 * required event and the forbidden `nonce` (§4.1).
 */
function isLogoutTyp(jws: Jws): boolean {
  const typ = typOf(jws);
  return typ === null || typ === "logout+jwt" || typ === "jwt";
}

/** Checks that hold before the signature is: the issuer is this route's upstream. */
export function checkIssuer(jws: Jws, upstream: Upstream, what: string, error: UpstreamErrorCode): void {
  if (jws.payload.iss !== upstream.issuer)
    throw upstreamRefused(error, `The ${what}'s iss is not the issuer of the upstream this URL is for.`);
}

/** A logout token's claims after its signature verified (§2.6, steps 3 to 6 and 8). */
export function logoutOf(jws: Jws, upstream: Upstream, nowSeconds: number): UpstreamEnding {
  const { payload } = jws;
  const fail = (description: string) => upstreamRefused("invalid_request", description);
  if (!isLogoutTyp(jws)) throw fail('The logout token\'s typ is neither "logout+jwt" nor "JWT".');
  if (!audienceOf(payload.aud).includes(upstream.clientId))
    throw fail("The logout token's aud does not contain this service's client id.");
  const fault = timesFault(payload, nowSeconds);
  if (fault) throw fail(`The logout token ${fault}.`);
  const { events, sub, sid, nonce } = payload;
  if (!isObject(events) || !isObject(events[BACKCHANNEL_LOGOUT_EVENT]))
    throw fail(`The logout token's events has no ${BACKCHANNEL_LOGOUT_EVENT} object.`);
  // A nonce would let an ID token pass for a logout token (§2.4).
  if (nonce !== undefined) throw fail("The logout token has a nonce.");
  if (sub === undefined && sid === undefined) throw fail("The logout token has neither sub nor sid.");
  if (sub !== undefined && !isUpstreamId(sub))
    throw fail("The logout token's sub is not a subject this service holds.");
  if (sid !== undefined && !isUpstreamId(sid))
    throw fail("The logout token's sid is not a session id this service holds.");
  // The subject leads to the user's database (src/services/upstreams/links.ts); a sid alone does not.
  if (sub === undefined)
    throw fail("The logout token has a sid without a sub: this service finds an upstream's sessions by the subject.");
  return {
    jti: payload.jti as string,
    subject: sub,
    sid: sid ?? null,
    issuedAt: new Date((payload.iat as number) * 1000),
  };
}

/**
 * A revocation request's authentication JWT after its signature verified (RFC 7523 §3): its
 * audience is this route's URL, as Okta's Universal Logout sends it, and it expires. Not the
 * client id: the upstream's ID tokens are audienced so, and a user holding one must not pass it
 * here for another's subject. Nor a token of another kind: no `nonce` (an ID token), no
 * `events` (a logout token or a SET), `typ` absent or `JWT`.
 */
export function checkRevocationJwt(jws: Jws, url: string, nowSeconds: number): void {
  const { payload } = jws;
  if (!audienceOf(payload.aud).includes(url)) throw upstreamRefused("invalid_token", "The JWT's aud is not this URL.");
  const typ = typOf(jws);
  if ((typ !== null && typ !== "jwt") || payload.nonce !== undefined || payload.events !== undefined)
    throw upstreamRefused("invalid_token", "The JWT is a token of another kind (typ, nonce or events).");
  if (typeof payload.exp !== "number") throw upstreamRefused("invalid_token", "The JWT has no exp.");
  const fault = timesFault(payload, nowSeconds);
  if (fault) throw upstreamRefused("invalid_token", `The JWT ${fault}.`);
}

/**
 * The subject a revocation request's body names (`sub_id`, RFC 9493): `iss_sub` of this
 * upstream's issuer. Other formats name no one this service can find (it keeps no email or
 * phone number, and an upstream does not name users by this service's ids): 400.
 */
export function revokedSubjectOf(body: unknown, upstream: Upstream): string {
  const subId = isObject(body) ? body.sub_id : undefined;
  if (!isObject(subId) || typeof subId.format !== "string")
    throw upstreamRefused(
      "invalid_request",
      "The body is not a JSON object with a sub_id subject identifier (RFC 9493).",
    );
  if (subId.format !== "iss_sub")
    throw upstreamRefused(
      "invalid_request",
      `The sub_id format ${JSON.stringify(subId.format).slice(0, 40)} is not supported: use iss_sub.`,
    );
  if (subId.iss !== upstream.issuer)
    throw upstreamRefused(
      "access_denied",
      "The sub_id's iss is not this upstream's issuer: an upstream revokes its own users only.",
    );
  if (!isUpstreamId(subId.sub))
    throw upstreamRefused("invalid_request", "The sub_id's sub is not a subject this service holds.");
  return subId.sub;
}
