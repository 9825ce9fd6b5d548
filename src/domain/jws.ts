import { base64Url } from "./token.ts";

// Compact JWS (RFC 7515) with the two algorithms this service accepts, ES256 and RS256, by
// WebCrypto: the one place that reads and verifies a signed token, for the browser's DBSC
// proofs and the identity provider's Security Event Tokens. Hand-written rather than `jose`:
// the same WebCrypto calls for several KB more of the bundle (BENCHMARKS.md, "Bundle budget").
// The tests sign and verify with jose, so each side is checked against it.

export const JWS_ALGORITHMS = ["ES256", "RS256"] as const;
export type JwsAlgorithm = (typeof JWS_ALGORITHMS)[number];

/** A public key reduced to its RFC 7638 required members, in their lexicographic order. */
export type PublicKey = { crv: "P-256"; kty: "EC"; x: string; y: string } | { e: string; kty: "RSA"; n: string };

const BASE64URL = /^[A-Za-z0-9_-]+$/;

function base64UrlBytes(text: string): Uint8Array<ArrayBuffer> | null {
  if (!BASE64URL.test(text)) return null;
  try {
    return Uint8Array.from(atob(text.replaceAll("-", "+").replaceAll("_", "/")), (char) => char.charCodeAt(0));
  } catch {
    return null;
  }
}

/** The JSON a base64url text encodes; null when it is not. */
export function base64UrlJson(text: string): unknown {
  const bytes = base64UrlBytes(text);
  if (!bytes) return null;
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
}

/** The key's required members, checked against the algorithm; null for any other key. */
export function publicKeyOf(jwk: unknown, alg: JwsAlgorithm): PublicKey | null {
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

/** RFC 7638 thumbprint (SHA-256, base64url). */
export async function thumbprint(key: PublicKey): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify(key)));
  return base64Url(new Uint8Array(digest));
}

const VERIFY = {
  ES256: { import: { name: "ECDSA", namedCurve: "P-256" }, verify: { name: "ECDSA", hash: "SHA-256" } },
  RS256: { import: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, verify: { name: "RSASSA-PKCS1-v1_5" } },
} as const;

export interface Jws {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  alg: JwsAlgorithm;
  /** What was signed and its signature, for `verifyJws`. */
  signed: Uint8Array;
  signature: Uint8Array<ArrayBuffer>;
}

/**
 * A compact JWS read but not verified: JSON header and payload, one of the two algorithms, no
 * `crit`. RFC 7515 §4.1.11: a JWS whose `crit` names an extension the reader does not
 * understand is invalid, and one with a malformed `crit` too; this reader understands none.
 */
export function parseJws(compact: string | null | undefined): Jws | null {
  const parts = compact?.split(".");
  if (parts?.length !== 3) return null;
  const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
  const header = base64UrlJson(encodedHeader);
  const payload = base64UrlJson(encodedPayload);
  const signature = base64UrlBytes(encodedSignature);
  if (typeof header !== "object" || header === null || typeof payload !== "object" || payload === null) return null;
  const alg = JWS_ALGORITHMS.find((name) => name === (header as Record<string, unknown>).alg);
  if (!alg || !signature || Array.isArray(payload) || "crit" in header) return null;
  const signed = new TextEncoder().encode(`${encodedHeader}.${encodedPayload}`);
  return {
    header: header as Record<string, unknown>,
    payload: payload as Record<string, unknown>,
    alg,
    signed,
    signature,
  };
}

/** Whether `key` signed `jws`; the key decides the algorithm, so an RS256 JWS cannot pass for an EC key. */
export async function verifyJws(jws: Jws, key: PublicKey): Promise<boolean> {
  if ((key.kty === "EC") !== (jws.alg === "ES256")) return false;
  try {
    const cryptoKey = await crypto.subtle.importKey("jwk", key, VERIFY[jws.alg].import, false, ["verify"]);
    return await crypto.subtle.verify(VERIFY[jws.alg].verify, cryptoKey, jws.signature, jws.signed);
  } catch {
    return false;
  }
}

const signingKeys = new Map<string, Promise<CryptoKey>>();

/**
 * A compact JWS of `payload` signed with a private JWK (`kid` names it; the algorithm follows
 * the key's type). The imported key is kept per isolate: importing costs more than signing.
 */
export async function signJws(
  payload: Record<string, unknown>,
  privateKey: JsonWebKey & { kid: string },
  header: Record<string, unknown> = {},
): Promise<string> {
  const alg: JwsAlgorithm = privateKey.kty === "EC" ? "ES256" : "RS256";
  // By the private member itself: a kid alone could name two keys (a test, a careless rotation).
  const cacheKey = `${privateKey.kid}:${privateKey.d}`;
  let key = signingKeys.get(cacheKey);
  if (!key) {
    const { kid: _, ...jwk } = privateKey;
    key = crypto.subtle.importKey("jwk", jwk, VERIFY[alg].import, false, ["sign"]);
    signingKeys.set(cacheKey, key);
  }
  const encode = (value: unknown) => base64Url(new TextEncoder().encode(JSON.stringify(value)));
  const signed = `${encode({ alg, kid: privateKey.kid, ...header })}.${encode(payload)}`;
  const signature = await crypto.subtle.sign(VERIFY[alg].verify, await key, new TextEncoder().encode(signed));
  return `${signed}.${base64Url(new Uint8Array(signature))}`;
}
