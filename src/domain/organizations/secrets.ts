import { CompactEncrypt, compactDecrypt } from "jose";
import { ConfigError, parsedOnce } from "../config.ts";

// What an organization gives the service to keep secret (its provider's push Authorization) is
// stored as a compact JWE (RFC 7516: `dir`, A256GCM) under a key of the Worker secret
// ORGANIZATION_SECRETS_KEYS, never in clear: a copy of the database alone reveals none. The
// first key encrypts, every key decrypts (by the JWE's `kid`), so a key is rotated by putting a
// new one first and dropping the old once every secret was written again. Each JWE names whose
// it is in its protected header (`org`, the organization; `sub`, its provider's name), checked
// when decrypted, so one row's secret cannot be copied into another's, of this organization or
// of another that has a provider of the same name.

declare global {
  interface Env {
    /** Secret: a JSON array of 256-bit keys as JWKs (`{"kty":"oct","kid":…,"k":…}`), the first encrypting. */
    ORGANIZATION_SECRETS_KEYS?: string;
  }
}

export interface SecretKeysVars {
  ORGANIZATION_SECRETS_KEYS?: string;
}

interface SecretKey {
  kid: string;
  key: Uint8Array;
}

const KEY_BYTES = 32;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

function parseKeys(text: string): SecretKey[] {
  const invalid = () =>
    new ConfigError(
      `ORGANIZATION_SECRETS_KEYS must be a JSON array of JWKs {"kty":"oct","kid","k"}, each k ${KEY_BYTES} bytes in base64url, kids unique (npm run organization:keys)`,
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw invalid();
  const keys = parsed.map((jwk: unknown): SecretKey => {
    const { kty, kid, k } = (jwk ?? {}) as Record<string, unknown>;
    if (kty !== "oct" || typeof kid !== "string" || kid === "" || typeof k !== "string" || !BASE64URL.test(k))
      throw invalid();
    const key = Uint8Array.from(atob(k.replaceAll("-", "+").replaceAll("_", "/")), (char) => char.charCodeAt(0));
    if (key.length !== KEY_BYTES) throw invalid();
    return { kid, key };
  });
  if (new Set(keys.map((key) => key.kid)).size !== keys.length) throw invalid();
  return keys;
}

const keysFrom = parsedOnce(parseKeys);

/** The keys, the first encrypting; null when the secret is unset. Throws a ConfigError naming the secret for a refused value. */
export function readSecretKeys(vars: SecretKeysVars): SecretKey[] | null {
  const text = vars.ORGANIZATION_SECRETS_KEYS ?? "";
  return text.trim() === "" ? null : keysFrom(text);
}

/** Whose a secret is: an organization's provider, by its name. */
export interface SecretOwner {
  organizationId: string;
  name: string;
}

/** `secret` as a compact JWE under the first key, bound to `owner` (its `org` and `sub` headers). */
export function sealSecret(keys: readonly SecretKey[], owner: SecretOwner, secret: string): Promise<string> {
  const [first] = keys as [SecretKey];
  return new CompactEncrypt(new TextEncoder().encode(secret))
    .setProtectedHeader({ alg: "dir", enc: "A256GCM", kid: first.kid, org: owner.organizationId, sub: owner.name })
    .encrypt(first.key);
}

/**
 * The secret a JWE of `sealSecret` holds for `owner`. Throws when no key has its `kid`, it does
 * not decrypt, or it is another owner's: a stored value the service cannot use, its failure. One
 * sealed before it named its organization is another's too: its name alone would open it for
 * any organization's provider of that name. Either is given again (the ConfigError says so).
 */
export async function openSecret(keys: readonly SecretKey[], owner: SecretOwner, sealed: string): Promise<string> {
  const { plaintext, protectedHeader } = await compactDecrypt(
    sealed,
    (header) => {
      const found = keys.find((key) => key.kid === header.kid);
      if (!found) throw new ConfigError("ORGANIZATION_SECRETS_KEYS has no key of a stored secret's kid");
      return found.key;
    },
    { keyManagementAlgorithms: ["dir"], contentEncryptionAlgorithms: ["A256GCM"] },
  );
  if (protectedHeader.org !== owner.organizationId || protectedHeader.sub !== owner.name)
    throw new ConfigError("a stored secret is another's, or sealed before it named its organization: send it again");
  return new TextDecoder().decode(plaintext);
}
