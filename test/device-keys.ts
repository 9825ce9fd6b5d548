// A stand-in DBSC browser for the Workers pool: it makes a key pair with WebCrypto, as Chrome
// does in software, and signs proofs the way the DBSC draft describes them.

export type Alg = "ES256" | "RS256";

export interface DeviceKey {
  alg: Alg;
  publicJwk: JsonWebKey;
  privateKey: CryptoKey;
}

const PARAMS = {
  ES256: {
    generate: { name: "ECDSA", namedCurve: "P-256" },
    sign: { name: "ECDSA", hash: "SHA-256" },
  },
  RS256: {
    generate: {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    sign: { name: "RSASSA-PKCS1-v1_5" },
  },
} as const;

export async function deviceKey(alg: Alg = "ES256"): Promise<DeviceKey> {
  const pair = (await crypto.subtle.generateKey(PARAMS[alg].generate, true, ["sign", "verify"])) as CryptoKeyPair;
  const { kty, crv, x, y, e, n } = (await crypto.subtle.exportKey("jwk", pair.publicKey)) as JsonWebKey;
  const publicJwk = alg === "ES256" ? { kty, crv, x, y } : { kty, e, n };
  return { alg, publicJwk, privateKey: pair.privateKey };
}

const base64Url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
const encode = (value: unknown) => base64Url(new TextEncoder().encode(JSON.stringify(value)));

/** A DBSC proof: `header` and `payload` override the defaults (registration puts the key in the header). */
export async function signProof(
  key: DeviceKey,
  challenge: string,
  options: { withKey?: boolean; header?: Record<string, unknown>; payload?: Record<string, unknown> } = {},
): Promise<string> {
  const header = {
    alg: key.alg,
    typ: "dbsc+jwt",
    ...(options.withKey ? { jwk: key.publicJwk } : {}),
    ...options.header,
  };
  const signed = `${encode(header)}.${encode({ jti: challenge, ...options.payload })}`;
  const signature = await crypto.subtle.sign(PARAMS[key.alg].sign, key.privateKey, new TextEncoder().encode(signed));
  return `${signed}.${base64Url(new Uint8Array(signature))}`;
}

/** The challenge of a `Secure-Session-Registration` or `Secure-Session-Challenge` value. */
export function challengeIn(header: string | null | undefined): string {
  const match = /(?:challenge=)?"([A-Za-z0-9_-]{22})"/.exec(header ?? "");
  if (!match) throw new Error(`no challenge in ${header}`);
  return match[1] as string;
}
