import { instant } from "./clock.ts";
import type { Config } from "./config.ts";
import { sessionCookie } from "./cookie.ts";
import { type Database, insertSession, type NewSession } from "./db/queries.ts";
import { parseDevice } from "./device.ts";
import { normalizeIp } from "./ip.ts";
import { generateToken, hashSecret } from "./token.ts";

// The one code path that creates sessions: SessionService.create and `npm run session:create`.

export interface CreateSessionInput {
  userId: string;
  ipAddress?: string | null;
  userAgent?: string | null;
  ttlSeconds?: number;
  /** The login request's `request.cf.country` (ISO 3166-1 alpha-2). */
  country?: string | null;
  /** The login request's `request.cf.city`. */
  city?: string | null;
}

export interface CreatedSession {
  id: string;
  token: string;
  expiresAt: string;
  /** A ready `Set-Cookie` value for the login response. */
  cookie: string;
}

export const MAX_USER_ID_LENGTH = 255;
export const MAX_USER_AGENT_LENGTH = 512;
export const MAX_CITY_LENGTH = 100;
/** Browsers cap cookie lifetimes at 400 days (RFC 6265bis), so sessions cannot outlive that. */
export const MAX_TTL_SECONDS = 400 * 24 * 60 * 60;

const COUNTRY = /^[A-Z0-9]{2}$/;

function cleanCity(city: string | null | undefined): string | null {
  // Control characters have no place in a label shown to users.
  const cleaned =
    typeof city === "string"
      ? city
          .replace(/\p{Cc}/gu, "")
          .trim()
          .slice(0, MAX_CITY_LENGTH)
      : "";
  return cleaned || null;
}

/** Cut to `max` UTF-16 units without leaving half a surrogate pair behind. */
function truncate(text: string, max: number): string {
  const cut = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/** A session as issued, before it is stored: its row, and what the caller is given. */
export interface NewSessionRow {
  row: NewSession;
  created: CreatedSession;
}

/** Checks the input and builds the session's row; `issueSession` stores it (the bench, in bulk). */
export async function buildSession(config: Config, input: CreateSessionInput): Promise<NewSessionRow> {
  const { userId } = input;
  if (typeof userId !== "string" || userId.trim() === "" || userId.length > MAX_USER_ID_LENGTH) {
    throw new TypeError(`userId must be a non-blank string of at most ${MAX_USER_ID_LENGTH} characters`);
  }
  const ttlSeconds = input.ttlSeconds ?? config.ttlSeconds;
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds <= 0 || ttlSeconds > MAX_TTL_SECONDS) {
    throw new RangeError(`ttlSeconds must be an integer from 1 to ${MAX_TTL_SECONDS}`);
  }
  const { id, secret, token } = generateToken();
  const createdAt = instant(config).now;
  const expiresAt = new Date(createdAt.getTime() + ttlSeconds * 1000);
  const userAgent = typeof input.userAgent === "string" ? truncate(input.userAgent, MAX_USER_AGENT_LENGTH) : "";
  const device = parseDevice(userAgent);
  const row: NewSession = {
    id,
    secretHash: await hashSecret(secret),
    userId,
    ipAddress: normalizeIp(input.ipAddress),
    userAgent,
    browser: device.browser,
    os: device.os,
    deviceType: device.type,
    country: typeof input.country === "string" && COUNTRY.test(input.country) ? input.country : null,
    city: cleanCity(input.city),
    createdAt,
    expiresAt,
    lastActiveAt: createdAt,
  };
  const cookie = sessionCookie(config.cookieName, token, ttlSeconds);
  return { row, created: { id, token, expiresAt: expiresAt.toISOString(), cookie } };
}

export async function issueSession(db: Database, config: Config, input: CreateSessionInput): Promise<CreatedSession> {
  const { row, created } = await buildSession(config, input);
  await insertSession(db, row, { sessionId: null, ipAddress: row.ipAddress ?? null });
  return created;
}
