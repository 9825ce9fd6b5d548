import { base64url } from "jose";
import { JWS_ALGORITHMS, type PublicKey, publicKeyOf, tokenFault, verifyJws } from "./jws.ts";
import { base64Url, randomBase64Url } from "./token.ts";

// Device Bound Session Credentials (W3C WebAppSec DBSC): the browser holds a private key the
// site never sees and proves possession with a signed JWT (a "DBSC proof"); the site keeps a
// short-lived bound cookie alive only while proofs keep coming. This file is the protocol:
// headers, proofs, keys, the session instructions. The routes are src/http/routes/device-binding.ts,
// the statements src/db/device-binding.ts.
//
// The refresh request carries the session identifier but no key (the spec forbids `jwk` there),
// and verifying the proof must come before the one write that renews the cookie. So the
// identifier this service gives the browser is `<session id>.<base64url of the public key>`: the
// proof is verified against that key first, and the write requires the row's stored thumbprint
// (RFC 7638) of the same key, so an identifier carrying another key matches nothing.

export const REGISTRATION_PATH = "/auth/dbsc/registration";
export const REFRESH_PATH = "/auth/dbsc/refresh";

/** The proof algorithms offered, in the browser's order of preference. */
const ALGORITHMS = JWS_ALGORITHMS;
const CHALLENGE_BYTES = 16;
const BOUND_SECRET_BYTES = 32;
/** The bound cookie's value: 32 random bytes, base64url. */
export const BOUND_SECRET = /^[A-Za-z0-9_-]{43}$/;

export const newChallenge = () => randomBase64Url(CHALLENGE_BYTES);
export const newBoundSecret = () => randomBase64Url(BOUND_SECRET_BYTES);

/** The `Secure-Session-Registration` value a login response carries to start binding. */
export function registrationHeader(challenge: string): string {
  return `(${ALGORITHMS.join(" ")});path="${REGISTRATION_PATH}";challenge="${challenge}"`;
}

/** `Secure-Session-Challenge`: the challenge the next proof of this session must sign. */
export function challengeHeader(challenge: string, sessionIdentifier: string): string {
  return `"${challenge}";id="${sessionIdentifier}"`;
}

/**
 * A structured-field string (RFC 9651) as a browser sends it; Chrome has sent some of these
 * bare, so an unquoted value is taken up to its first parameter. Null when empty.
 */
export function fieldString(value: string | undefined): string | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  const quoted = /^"((?:[^"\\]|\\["\\])*)"/.exec(trimmed);
  const text = quoted ? (quoted[1] as string).replace(/\\(["\\])/g, "$1") : (trimmed.split(";")[0] as string).trim();
  return text === "" ? null : text;
}

/** The identifier the browser keeps for a bound session: its id and its public key. */
export function sessionIdentifier(sessionId: string, key: PublicKey): string {
  return `${sessionId}.${base64Url(new TextEncoder().encode(JSON.stringify(key)))}`;
}

/** `Sec-Secure-Session-Id` read back; null when it is not one this service gave out. */
export function parseSessionIdentifier(identifier: string): { sessionId: string; key: PublicKey } | null {
  const dot = identifier.indexOf(".");
  const encoded = identifier.slice(dot + 1);
  // jose's decoder would also take padding, whitespace and standard base64: this service writes none of them.
  if (dot === -1 || !/^[A-Za-z0-9_-]+$/.test(encoded)) return null;
  let key: Record<string, unknown> | null;
  try {
    key = JSON.parse(new TextDecoder().decode(base64url.decode(encoded)));
  } catch {
    return null;
  }
  const alg = key?.kty === "EC" ? "ES256" : "RS256";
  const publicKey = publicKeyOf(key, alg);
  return publicKey && { sessionId: identifier.slice(0, dot), key: publicKey };
}

export interface VerifiedDeviceProof {
  /** The `jti`: the challenge the proof signed. */
  challenge: string;
  key: PublicKey;
}

/**
 * Whether WebCrypto refused to import a key's material (a point off the curve: workerd says
 * OperationError where the spec says DataError). The key came with the request: that is the
 * caller's mistake, not this service's.
 */
const isRefusedKey = (error: unknown) =>
  error instanceof DOMException && (error.name === "DataError" || error.name === "OperationError");

/**
 * Verifies a DBSC proof (the `Secure-Session-Response` value): a compact JWS with `typ`
 * `dbsc+jwt`, ES256 or RS256, and a string `jti`. At registration (`key` null) the key is
 * the one in its header, at refresh the session's. Only `jti` is required of the payload:
 * Chrome sends little else. Null for anything that does not verify.
 */
export async function verifyDeviceProof(
  response: string | null,
  key: PublicKey | null,
): Promise<VerifiedDeviceProof | null> {
  if (response === null) return null;
  let publicKey = key;
  try {
    const proof = await verifyJws(response, async ({ header, payload, alg }) => {
      // The spec's one exception to "never the header's key": registration registers that key.
      publicKey ??= publicKeyOf(header.jwk, alg);
      const { jti } = payload;
      const acceptable = header.typ === "dbsc+jwt" && typeof jti === "string" && jti !== "";
      return acceptable ? publicKey : null;
    });
    return proof && publicKey && { challenge: proof.payload.jti as string, key: publicKey };
  } catch (error) {
    if (tokenFault(error) || isRefusedKey(error)) return null;
    throw error;
  }
}

/** The JSON session instructions: what the browser keeps bound, and where it refreshes. */
export function sessionInstructions(identifier: string, boundCookieName: string) {
  return {
    session_identifier: identifier,
    refresh_url: REFRESH_PATH,
    scope: { include_site: false },
    credentials: [{ type: "cookie", name: boundCookieName, attributes: "Path=/; Secure; HttpOnly; SameSite=Lax" }],
  };
}
