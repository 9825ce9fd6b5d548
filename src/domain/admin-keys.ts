import { ConfigError, parsedOnce } from "./config.ts";
import { isOrganizationId } from "./organizations/organization.ts";
import { newCredential, parseCredential } from "./token.ts";

// Admin keys: what a server on any stack holds to call the admin API (`/admin/*`), the HTTP
// twin of the SessionService RPC. A key can mint a session for any user, so it is built as
// carefully as the sign-in: each key has a name and scopes, only its secret's SHA-256 is kept
// (in the secret ADMIN_KEYS, made by `npm run admin:keys`), it is shown once, and every call
// logs a line naming it. Checking a key costs no database round trip; revoking one is an update
// of the secret. Without ADMIN_KEYS the admin API does not exist (404).

/** The one list of scopes: what each admin route requires, the key command and the docs derive from it. */
export const ADMIN_SCOPES = [
  "sessions:create",
  "sessions:read",
  "sessions:end",
  "sessions:data",
  "support",
  // The directory of organizations and an organization's own settings (docs/organizations.md).
  "organizations",
] as const;
export type AdminScope = (typeof ADMIN_SCOPES)[number];

/** Every key starts so, for secret scanners (GitHub push protection, gitleaks) to match: `ssak_<id>.<secret>`. */
export const ADMIN_KEY_PREFIX = "ssak_";
export const ADMIN_KEY_PATTERN = /ssak_[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}/;

/** A key as ADMIN_KEYS holds it: never its secret. */
export interface AdminKey {
  id: string;
  name: string;
  scopes: AdminScope[];
  /** SHA-256 of the secret, hex. */
  secretHash: string;
  createdAt: string;
  /**
   * The one organization the key manages (its providers, policy and members' sessions); absent:
   * the whole deployment. Outside it every call answers 404, as if nothing were there.
   */
  organization?: string;
}

export const MAX_KEY_NAME_LENGTH = 64;

function isAdminKey(value: unknown): value is AdminKey {
  if (typeof value !== "object" || value === null) return false;
  const { id, name, scopes, secretHash, createdAt, organization, ...rest } = value as Record<string, unknown>;
  return (
    Object.keys(rest).length === 0 &&
    (organization === undefined || isOrganizationId(organization)) &&
    typeof id === "string" &&
    /^[A-Za-z0-9_-]{22}$/.test(id) &&
    isKeyName(name) &&
    Array.isArray(scopes) &&
    scopes.length > 0 &&
    scopes.every((scope) => (ADMIN_SCOPES as readonly unknown[]).includes(scope)) &&
    new Set(scopes).size === scopes.length &&
    typeof secretHash === "string" &&
    /^[0-9a-f]{64}$/.test(secretHash) &&
    typeof createdAt === "string" &&
    !Number.isNaN(Date.parse(createdAt))
  );
}

/** A key's name: shown in every log line of its calls, so printable and short. */
export function isKeyName(name: unknown): name is string {
  return (
    typeof name === "string" &&
    name.trim() === name &&
    name !== "" &&
    name.length <= MAX_KEY_NAME_LENGTH &&
    !/[\p{Cc}\p{Cf}]/u.test(name)
  );
}

const keysFrom = parsedOnce((text: string): Map<string, AdminKey> => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  if (
    !Array.isArray(parsed) ||
    !parsed.every(isAdminKey) ||
    new Set(parsed.map((key) => key.id)).size !== parsed.length
  )
    throw new ConfigError(
      `ADMIN_KEYS must be a JSON array of keys as npm run admin:keys writes them (id, name, scopes of ${ADMIN_SCOPES.join(", ")}, secretHash, createdAt, optionally an organization id), ids unique`,
    );
  return new Map(parsed.map((key) => [key.id, key]));
});

/**
 * The keys ADMIN_KEYS holds, by id; null when it is unset or empty (no admin API). Throws a
 * ConfigError naming the var and its rule, never a value.
 */
export function readAdminKeys(vars: { ADMIN_KEYS?: string }): Map<string, AdminKey> | null {
  return vars.ADMIN_KEYS ? keysFrom(vars.ADMIN_KEYS) : null;
}

/** The configured key `presented` is, or null: malformed, unknown, or not its secret (a revoked key is no longer listed). */
export async function matchAdminKey(keys: Map<string, AdminKey>, presented: string): Promise<AdminKey | null> {
  if (!presented.startsWith(ADMIN_KEY_PREFIX)) return null;
  const proof = await parseCredential(presented.slice(ADMIN_KEY_PREFIX.length));
  const key = proof && keys.get(proof.id);
  return key && key.secretHash === proof.secretHash ? key : null;
}

/** A new key: what ADMIN_KEYS keeps of it, and the key itself, to be shown once. */
export async function newAdminKey(
  name: string,
  scopes: AdminScope[],
  at: Date,
): Promise<{ stored: AdminKey; key: string }> {
  const credential = newCredential();
  const key = `${ADMIN_KEY_PREFIX}${credential.token}`;
  const proof = await parseCredential(credential.token);
  if (!proof) throw new Error("a new credential must prove");
  return { stored: { id: proof.id, name, scopes, secretHash: proof.secretHash, createdAt: at.toISOString() }, key };
}
