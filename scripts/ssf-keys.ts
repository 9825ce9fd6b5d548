// The Shared Signals transmitter's signing keys: the value of the secret SSF_SIGNING_KEYS
// (src/domain/ssf/transmitter.ts), made and rotated here, on the operator's machine. Output is
// the new key set on stdout, for `wrangler secret put SSF_SIGNING_KEYS`; nothing is logged.
//   npm run --silent ssf:keys -- new [--alg ES256|RS256] > keys.json
//   npm run --silent ssf:keys -- rotate --overlap <seconds> [--alg ES256|RS256] < keys.json > new-keys.json
// `rotate` puts a new signing key first and keeps the old one published for --overlap seconds
// (at least the key set's cache lifetime plus the age at which receivers still accept a SET),
// dropping keys whose overlap has ended. RS256 is what the CAEP interoperability profile asks for.
import { readFileSync } from "node:fs";
import { JWS_ALGORITHMS, type JwsAlgorithm } from "../src/domain/jws.ts";
import { keyId } from "../src/domain/signing-keys.ts";
import { DISCOVERY_MAX_AGE_SECONDS, readTransmitter } from "../src/domain/ssf/transmitter.ts";
import { parseOptions, refuse } from "./options.ts";

const USAGE = `usage: npm run --silent ssf:keys -- new [--alg ES256|RS256]
       npm run --silent ssf:keys -- rotate --overlap <seconds> [--alg ES256|RS256] < keys.json`;

function fail(problem: string): never {
  refuse(problem, USAGE);
}

const { values, positionals } = parseOptions(
  process.argv.slice(2),
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
  if (!Number.isSafeInteger(overlap) || overlap < DISCOVERY_MAX_AGE_SECONDS)
    fail(`--overlap must be whole seconds, at least the key set's cache lifetime (${DISCOVERY_MAX_AGE_SECONDS})`);
  const text = readFileSync(0, "utf8");
  try {
    // The worker's own rules: a key set it would refuse is refused here, before anything is made of it.
    readTransmitter({ SSF_ISSUER: "https://check.invalid", SSF_SIGNING_KEYS: text });
  } catch (error) {
    fail(`stdin is not a key set: ${error instanceof Error ? error.message : error}`);
  }
  const now = Math.floor(Date.now() / 1000);
  const [current, ...rotated] = JSON.parse(text) as Record<string, unknown>[];
  keys = [...keys, { ...current, exp: now + overlap }, ...rotated.filter((key) => (key.exp as number) > now)];
}
console.log(JSON.stringify(keys));
