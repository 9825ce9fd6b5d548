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
const ALGORITHMS = ["ES256", "RS256"] as const;
type Algorithm = (typeof ALGORITHMS)[number];

/** A public key reduced to its RFC 7638 required members, in their lexicographic order. */
export type PublicKey = { crv: "P-256"; kty: "EC"; x: string; y: string } | { e: string; kty: "RSA"; n: string };

const BASE64URL = /^[A-Za-z0-9_-]+$/;
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

function base64UrlBytes(text: string): Uint8Array<ArrayBuffer> | null {
  if (!BASE64URL.test(text)) return null;
  try {
    return Uint8Array.from(atob(text.replaceAll("-", "+").replaceAll("_", "/")), (char) => char.charCodeAt(0));
  } catch {
    return null;
  }
}

function base64UrlJson(text: string): unknown {
  const bytes = base64UrlBytes(text);
  if (!bytes) return null;
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
}

/** The key's required members, checked against the algorithm; null for any other key. */
function publicKeyOf(jwk: unknown, alg: Algorithm): PublicKey | null {
  if (typeof jwk !== "object" || jwk === null) return null;
  const { kty, crv, x, y, e, n } = jwk as Record<string, unknown>;
  const b64 = (value: unknown, length?: [number, number]): value is string =>
    typeof value === "string" &&
    BASE64URL.test(value) &&
    (!length || (value.length >= length[0] && value.length <= length[1]));
  if (alg === "ES256" && kty === "EC" && crv === "P-256" && b64(x, [43, 43]) && b64(y, [43, 43]))
    return { crv, kty, x, y };
  // 2048 to 4096-bit moduli: anything shorter is too weak, anything longer only costs CPU.
  if (alg === "RS256" && kty === "RSA" && b64(e, [1, 8]) && b64(n, [342, 683])) return { e, kty, n };
  return null;
}

/** RFC 7638 thumbprint (SHA-256, base64url): what the session row stores of its key. */
export async function thumbprint(key: PublicKey): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify(key)));
  return base64Url(new Uint8Array(digest));
}

/** The identifier the browser keeps for a bound session: its id and its public key. */
export function sessionIdentifier(sessionId: string, key: PublicKey): string {
  return `${sessionId}.${base64Url(new TextEncoder().encode(JSON.stringify(key)))}`;
}

/** `Sec-Secure-Session-Id` read back; null when it is not one this service gave out. */
export function parseSessionIdentifier(identifier: string): { sessionId: string; key: PublicKey } | null {
  const dot = identifier.indexOf(".");
  if (dot === -1) return null;
  const key = base64UrlJson(identifier.slice(dot + 1)) as Record<string, unknown> | null;
  const alg = key?.kty === "EC" ? "ES256" : "RS256";
  const publicKey = publicKeyOf(key, alg);
  return publicKey && { sessionId: identifier.slice(0, dot), key: publicKey };
}

const VERIFY = {
  ES256: { import: { name: "ECDSA", namedCurve: "P-256" }, verify: { name: "ECDSA", hash: "SHA-256" } },
  RS256: { import: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, verify: { name: "RSASSA-PKCS1-v1_5" } },
} as const;

export interface VerifiedProof {
  /** The `jti`: the challenge the proof signed. */
  challenge: string;
  key: PublicKey;
}

/**
 * Verifies a DBSC proof (the `Secure-Session-Response` value): a compact JWS with `typ`
 * `dbsc+jwt`, ES256 or RS256, and a string `jti`. At registration (`key` null) the key is
 * the one in its header, at refresh the session's. Only `jti` is required of the payload:
 * Chrome sends little else. Null for anything that does not verify.
 */
export async function verifyProof(response: string | null, key: PublicKey | null): Promise<VerifiedProof | null> {
  const parts = response?.split(".");
  if (parts?.length !== 3) return null;
  const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
  const header = base64UrlJson(encodedHeader) as Record<string, unknown> | null;
  const payload = base64UrlJson(encodedPayload) as Record<string, unknown> | null;
  const signature = base64UrlBytes(encodedSignature);
  if (!header || !payload || !signature || header.typ !== "dbsc+jwt") return null;
  const alg = ALGORITHMS.find((name) => name === header.alg);
  if (!alg || typeof payload.jti !== "string" || payload.jti === "") return null;
  const publicKey = key ?? publicKeyOf(header.jwk, alg);
  // The session's key decides the algorithm: an RS256 proof cannot pass for an EC key.
  if (!publicKey || (publicKey.kty === "EC") !== (alg === "ES256")) return null;
  try {
    const cryptoKey = await crypto.subtle.importKey("jwk", publicKey, VERIFY[alg].import, false, ["verify"]);
    const signed = new TextEncoder().encode(`${encodedHeader}.${encodedPayload}`);
    const valid = await crypto.subtle.verify(VERIFY[alg].verify, cryptoKey, signature, signed);
    return valid ? { challenge: payload.jti, key: publicKey } : null;
  } catch {
    return null;
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
