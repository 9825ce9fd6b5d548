// A token is `<id>.<secret>`: the id finds the row by primary key, the secret proves
// possession. Only SHA-256 of the secret is stored, so a leaked table cannot be replayed.
//
// A member's session (of an organization) has a secret one byte longer: the worker knows
// before its one batch which statements the session's rules need, so a session outside any
// organization is sent exactly the statements its vars call for (src/db/authenticated.ts). The
// length is proven with the secret: no other secret of the session hashes as its own.
//
// The id also names where the session lives, so a request finds its database from the
// token alone (src/db/shards.ts): `[region]<bucket><random>`, where `region` is absent for
// the default region or two lowercase letters (`eu`), `bucket` is the user's virtual bucket
// in two base64url characters (12 bits), and `random` is 16 random bytes (22 characters).
//
// A Shared Signals receiver's credential (src/services/ssf/receivers.ts) has the same form, its id
// the random part alone: receivers live in one database, which the id need not name.
//
// A report token (src/services/report.ts) is `<session id>~<secret>`: it names its session, so
// its database too, and `~` is in no session token (base64url and one `.`), nor `.` in a report
// token, so neither is ever read as the other.

const RANDOM_BYTES = 16;
const SECRET_BYTES = 32;
const MEMBER_SECRET_BYTES = SECRET_BYTES + 1;
/** base64url of 16 bytes, unpadded: what follows the bucket in an id. */
export const RANDOM_LENGTH = 22;
const SECRET_LENGTH = 43; // base64url of 32 bytes, unpadded
const MEMBER_SECRET_LENGTH = 44; // of 33
const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** Virtual buckets per region: a user's bucket is fixed, configuration maps buckets to databases. */
export const BUCKET_COUNT = BASE64URL.length ** 2;
export const DEFAULT_REGION = "default";
/** Names of regions other than the default: they are written into the ids as they are. */
export const REGION_PATTERN = /^[a-z]{2}$/;

/** Every session id this service issues: [region] bucket random. The OpenAPI document's SessionId too. */
export const SESSION_ID_PATTERN = new RegExp(`^([a-z]{2})?([A-Za-z0-9_-]{2})[A-Za-z0-9_-]{${RANDOM_LENGTH}}$`);
const CREDENTIAL_ID_PATTERN = new RegExp(`^[A-Za-z0-9_-]{${RANDOM_LENGTH}}$`);
const SECRET_PATTERN = new RegExp(`^[A-Za-z0-9_-]{${SECRET_LENGTH}}$`);
const SESSION_SECRET_PATTERN = new RegExp(`^[A-Za-z0-9_-]{${SECRET_LENGTH},${MEMBER_SECRET_LENGTH}}$`);
const LONGEST_ID = 2 + 2 + RANDOM_LENGTH;

/** The longest token this service issues; anything longer is malformed without a lookup. */
export const TOKEN_LENGTH = LONGEST_ID + 1 + MEMBER_SECRET_LENGTH;

/** Where a session lives: its user's region and virtual bucket. */
export interface Placement {
  region: string;
  bucket: number;
}

export interface ParsedToken {
  id: string;
  secret: string;
}

/** A session token's id and secret hash, and whether its secret is a member's (an organization's session). */
export interface ParsedSessionToken {
  id: string;
  secretHash: string;
  member: boolean;
}

/** Unpadded base64url (RFC 4648 §5), as in tokens and JOSE. */
export function base64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

export function randomBase64Url(bytes: number): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/**
 * A bucket as the prefix every session id in it starts with (`AB`, `euAB`): how the move
 * state names it (src/db/schema.ts `bucket_moves`) and how a move finds its rows.
 */
export function bucketKey({ region, bucket }: Placement): string {
  if (!Number.isInteger(bucket) || bucket < 0 || bucket >= BUCKET_COUNT) throw new RangeError(`bucket ${bucket}`);
  const bucketChars = `${BASE64URL[bucket >> 6]}${BASE64URL[bucket & 63]}`;
  return region === DEFAULT_REGION ? bucketChars : `${region}${bucketChars}`;
}

/** A new session's token; `member`: the session is an organization's (its secret a member's). */
export function generateToken(placement: Placement, member: boolean): ParsedToken & { token: string } {
  return newSessionSecret(`${bucketKey(placement)}${randomBase64Url(RANDOM_BYTES)}`, member);
}

/** A session's token of `id` with a fresh secret, a member's as before: a new session's, a re-authenticated one's. */
export function newSessionSecret(id: string, member: boolean): ParsedToken & { token: string } {
  return newSecretFor(id, ".", member ? MEMBER_SECRET_BYTES : SECRET_BYTES);
}

/** A token of `id` with a fresh secret: a session's, a receiver's, a report's. */
function newSecretFor(id: string, separator: string, bytes = SECRET_BYTES): ParsedToken & { token: string } {
  const secret = randomBase64Url(bytes);
  return { id, secret, token: `${id}${separator}${secret}` };
}

/** A receiver's credential: its id is the random part alone. */
export function newCredential(): ParsedToken & { token: string } {
  return newSecretFor(randomBase64Url(RANDOM_BYTES), ".");
}

/** The placement a session id names, or null when it cannot be a session id at all. */
export function placementOf(id: string): Placement | null {
  if (id.length > LONGEST_ID) return null;
  const match = SESSION_ID_PATTERN.exec(id);
  if (!match) return null;
  const bucket = match[2] as string;
  return {
    region: match[1] ?? DEFAULT_REGION,
    bucket: BASE64URL.indexOf(bucket[0] as string) * 64 + BASE64URL.indexOf(bucket[1] as string),
  };
}

/**
 * `<id><separator><secret>` reduced to what is compared with the table, or null when `isId`
 * refuses the id or the rest cannot be what this service issued (the contract's "malformed").
 */
async function parse(
  token: string,
  isId: (id: string) => unknown,
  separator = ".",
  secrets = SECRET_PATTERN,
): Promise<{ id: string; secretHash: string } | null> {
  if (token.length > TOKEN_LENGTH) return null;
  const at = token.indexOf(separator);
  const id = token.slice(0, at);
  const secret = token.slice(at + 1);
  if (at === -1 || !isId(id) || !secrets.test(secret)) return null;
  return { id, secretHash: await hashSecret(secret) };
}

/** A session token reduced to what is compared with the table, or null when it is malformed. */
export async function parseToken(token: string): Promise<ParsedSessionToken | null> {
  const parsed = await parse(token, placementOf, ".", SESSION_SECRET_PATTERN);
  return parsed && { ...parsed, member: token.length - parsed.id.length - 1 === MEMBER_SECRET_LENGTH };
}

const REPORT_SEPARATOR = "~";

/** A new report token for the session `id`, with a secret of its own. */
export function newReportToken(id: string): ParsedToken & { token: string } {
  return newSecretFor(id, REPORT_SEPARATOR);
}

/** A report token reduced to its session id and secret hash, or null when it is malformed. */
export function parseReportToken(token: string) {
  return parse(token, placementOf, REPORT_SEPARATOR);
}

/** The same for a receiver's credential (`newCredential`). */
export function parseCredential(token: string) {
  return parse(token, (id) => CREDENTIAL_ID_PATTERN.test(id));
}

const encoder = new TextEncoder();
// Every request by token hashes one secret: a byte's two hex digits looked up, not formatted.
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

export async function hashSecret(secret: string): Promise<string> {
  let hex = "";
  for (const byte of new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(secret)))) hex += HEX[byte];
  return hex;
}
