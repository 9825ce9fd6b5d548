import {
  type CompactJWSHeaderParameters,
  CompactSign,
  compactVerify,
  decodeJwt,
  errors,
  type FlattenedJWSInput,
  type JWK,
  type JWTPayload,
} from "jose";

// Every signed token this service reads or writes goes through `jose`, by its public API: the
// browser's DBSC proofs and the upstreams' SETs, logout tokens and revocation JWTs are verified
// here, access tokens and SETs signed. Two algorithms, ES256 and RS256. The key is always the
// caller's choice (`keyFor`): a registered key, an upstream's key set; never one the token's
// header carries (`jwk`, `jku`, `x5u`, `x5c`), which jose does not read unless asked to.

export const JWS_ALGORITHMS = ["ES256", "RS256"] as const;
export type JwsAlgorithm = (typeof JWS_ALGORITHMS)[number];

/** A public key reduced to its RFC 7638 required members, in their lexicographic order. */
export type PublicKey = { crv: "P-256"; kty: "EC"; x: string; y: string } | { e: string; kty: "RSA"; n: string };

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The key's required members, checked against the algorithm; null for any other key. */
export function publicKeyOf(jwk: unknown, alg: unknown): PublicKey | null {
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

/** A compact JWS read by jose: its protected header and its payload, a JSON object. */
export interface Jws {
  header: CompactJWSHeaderParameters;
  payload: JWTPayload;
  alg: JwsAlgorithm;
}

/**
 * What names the key, given the token read but not verified yet (`token` is what jose's key
 * sets take with the header): a key jose imported, or a public JWK for jose to import; null: none.
 */
export type KeyFor = (jws: Jws, token: FlattenedJWSInput) => Promise<CryptoKey | PublicKey | null>;

// Thrown through jose's key resolver when `keyFor` names no key, and caught right back.
class NoKey extends Error {}

/**
 * The compact JWS verified by jose with the key `keyFor` names: ES256 or RS256, a JSON object
 * payload, no `crit`. Null when `keyFor` names none. A token that is not such a JWS, or whose
 * signature does not verify, throws jose's error (`tokenFault` tells which); `keyFor`'s throws
 * pass through.
 */
export async function verifyJws(compact: string, keyFor: KeyFor): Promise<Jws | null> {
  const verified: { jws: Jws | null } = { jws: null };
  try {
    await compactVerify(
      compact,
      async (header, token) => {
        // RFC 7515 §4.1.11: a JWS whose `crit` names an extension its reader does not understand
        // is invalid. This reader understands none, not even jose's `b64`: a JWT's payload is encoded.
        if (header.crit !== undefined) throw new errors.JWSInvalid("crit is not understood");
        verified.jws = { header, payload: decodeJwt(compact), alg: header.alg as JwsAlgorithm };
        const key = await keyFor(verified.jws, token);
        if (key === null) throw new NoKey();
        return key;
      },
      { algorithms: [...JWS_ALGORITHMS] },
    );
  } catch (error) {
    if (error instanceof NoKey) return null;
    throw error;
  }
  return verified.jws;
}

/**
 * What a verification's error says of the token: not a compact JWS of the two algorithms
 * ("malformed"), or signed by another key ("forged"). Null for any other error, a bug's
 * included, which the caller throws on.
 */
export function tokenFault(error: unknown): "malformed" | "forged" | null {
  if (error instanceof errors.JWSSignatureVerificationFailed) return "forged";
  const malformed =
    error instanceof errors.JWSInvalid ||
    error instanceof errors.JWTInvalid ||
    error instanceof errors.JOSEAlgNotAllowed ||
    error instanceof errors.JOSENotSupported;
  return malformed ? "malformed" : null;
}

/**
 * A compact JWS of `payload` signed with a private JWK (`kid` names it; the algorithm follows
 * the key's type). jose imports a key object once and keeps it: keep passing the same object.
 */
export function signJws(
  payload: JWTPayload,
  privateKey: JsonWebKey & { kid: string },
  header: Record<string, unknown> = {},
): Promise<string> {
  const alg: JwsAlgorithm = privateKey.kty === "EC" ? "ES256" : "RS256";
  return new CompactSign(new TextEncoder().encode(JSON.stringify(payload)))
    .setProtectedHeader({ alg, kid: privateKey.kid, ...header })
    .sign(privateKey as JWK);
}
