// A token is `<id>.<secret>`: the id finds the row by primary key, the secret proves
// possession. Only SHA-256 of the secret is stored, so a leaked table cannot be replayed.

const ID_BYTES = 16;
const SECRET_BYTES = 32;
const ID_LENGTH = 22; // base64url of 16 bytes, unpadded
const SECRET_LENGTH = 43; // base64url of 32 bytes, unpadded

/** The longest token this service issues; anything longer is malformed without a lookup. */
export const TOKEN_LENGTH = ID_LENGTH + 1 + SECRET_LENGTH;

const TOKEN_PATTERN = new RegExp(`^([A-Za-z0-9_-]{${ID_LENGTH}})\\.([A-Za-z0-9_-]{${SECRET_LENGTH}})$`);
const ID_PATTERN = new RegExp(`^[A-Za-z0-9_-]{${ID_LENGTH}}$`);

export interface ParsedToken {
  id: string;
  secret: string;
}

function randomBase64Url(bytes: number): string {
  const buffer = crypto.getRandomValues(new Uint8Array(bytes));
  return btoa(String.fromCharCode(...buffer))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

export function generateToken(): ParsedToken & { token: string } {
  const id = randomBase64Url(ID_BYTES);
  const secret = randomBase64Url(SECRET_BYTES);
  return { id, secret, token: `${id}.${secret}` };
}

/** Null when the string cannot be a token this service issued (the contract's "malformed"). */
export function parseToken(token: string): ParsedToken | null {
  if (token.length !== TOKEN_LENGTH) return null;
  const match = TOKEN_PATTERN.exec(token);
  return match ? { id: match[1] as string, secret: match[2] as string } : null;
}

/** Whether a path segment could be a session id at all; others cannot match a row. */
export function isSessionId(value: string): boolean {
  return ID_PATTERN.test(value);
}

/** A token reduced to what is compared with the table, or null when it is malformed. */
export async function proveToken(token: string): Promise<{ id: string; secretHash: string } | null> {
  const parsed = parseToken(token);
  return parsed && { id: parsed.id, secretHash: await hashSecret(parsed.secret) };
}

export async function hashSecret(secret: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}
