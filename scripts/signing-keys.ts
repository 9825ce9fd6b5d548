// The key sets this service signs with, made and rotated here, on the operator's machine: the
// Shared Signals transmitter's (the secret SSF_SIGNING_KEYS, `npm run ssf:keys`) and the access
// tokens' (ACCESS_TOKEN_KEYS, `npm run token:keys`), both read by src/domain/signing-keys.ts.
// Output is the new key set on stdout, for `wrangler secret put`; nothing is logged, and no key
// is ever an argument.
//   npm run --silent ssf:keys -- new [--alg ES256|RS256] > keys.json
//   npm run --silent ssf:keys -- rotate --overlap <seconds> [--alg ES256|RS256] < keys.json > new-keys.json
// `rotate` puts a new signing key first and keeps the old one published for --overlap seconds,
// dropping keys whose overlap has ended. The overlap must cover the key set's cache lifetime and
// the longest anything signed just before the rotation is still verified: for access tokens
// their lifetime, for SETs the age at which receivers still accept one. RS256 is what the CAEP
// interoperability profile asks for; access tokens default to ES256 like everything else.
import { readFileSync } from "node:fs";
import { JWKS_MAX_AGE_SECONDS, MAX_ACCESS_TOKEN_TTL_SECONDS } from "../src/domain/access-token.ts";
import { JWS_ALGORITHMS, type JwsAlgorithm } from "../src/domain/jws.ts";
import { keyId, keySetOf } from "../src/domain/signing-keys.ts";
import { DISCOVERY_MAX_AGE_SECONDS } from "../src/domain/ssf/transmitter.ts";
import { parseOptions, refuse } from "./options.ts";

/** Each key set by its secret's name: its npm script, and the shortest overlap a rotation may keep. */
const KEY_SETS = {
  SSF_SIGNING_KEYS: { script: "ssf:keys", minOverlap: DISCOVERY_MAX_AGE_SECONDS },
  ACCESS_TOKEN_KEYS: { script: "token:keys", minOverlap: JWKS_MAX_AGE_SECONDS + MAX_ACCESS_TOKEN_TTL_SECONDS },
} as const;

const [secret, ...args] = process.argv.slice(2);
if (secret !== "SSF_SIGNING_KEYS" && secret !== "ACCESS_TOKEN_KEYS")
  refuse("the key set to make: SSF_SIGNING_KEYS or ACCESS_TOKEN_KEYS", "usage: npm run ssf:keys | token:keys");
const { script, minOverlap } = KEY_SETS[secret];
const USAGE = `usage: npm run --silent ${script} -- new [--alg ES256|RS256]
       npm run --silent ${script} -- rotate --overlap <seconds> [--alg ES256|RS256] < keys.json`;

function fail(problem: string): never {
  refuse(problem, USAGE);
}

const { values, positionals } = parseOptions(
  args,
  { alg: { type: "string", default: "ES256" }, overlap: { type: "string" } },
  USAGE,
  true,
);
const [command] = positionals;
if (positionals.length !== 1 || (command !== "new" && command !== "rotate")) fail("one command: new or rotate");
const alg = values.alg as JwsAlgorithm;
if (!JWS_ALGORITHMS.includes(alg)) fail(`--alg must be one of ${JWS_ALGORITHMS.join(", ")}`);

async function newKey(): Promise<Record<string, unknown>> {
  const params =
    alg === "ES256"
      ? { name: "ECDSA", namedCurve: "P-256" }
      : { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" };
  const pair = (await crypto.subtle.generateKey(params, true, ["sign"])) as CryptoKeyPair;
  const exported: Record<string, unknown> = { ...(await crypto.subtle.exportKey("jwk", pair.privateKey)) };
  // WebCrypto's own members, not the key's.
  const { key_ops: _, ext: __, ...jwk } = exported;
  return { ...jwk, kid: await keyId(jwk) };
}

let keys: Record<string, unknown>[] = [await newKey()];
if (command === "rotate") {
  const overlap = Number(values.overlap);
  if (!Number.isSafeInteger(overlap) || overlap < minOverlap)
    fail(`--overlap must be whole seconds, at least ${minOverlap} (the key set's cache lifetime and what it signs)`);
  const text = readFileSync(0, "utf8");
  try {
    // The worker's own rules: a key set it would refuse is refused here, before anything is made of it.
    keySetOf(secret, text);
  } catch (error) {
    fail(`stdin is not a key set: ${error instanceof Error ? error.message : error}`);
  }
  const now = Math.floor(Date.now() / 1000);
  const [current, ...rotated] = JSON.parse(text) as Record<string, unknown>[];
  keys = [...keys, { ...current, exp: now + overlap }, ...rotated.filter((key) => (key.exp as number) > now)];
}
console.log(JSON.stringify(keys));
