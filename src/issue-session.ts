import { now } from "./clock.ts";
import type { Config } from "./config.ts";
import { sessionCookie } from "./cookie.ts";
import { type Database, insertSession } from "./db/queries.ts";
import { normalizeIp } from "./ip.ts";
import { generateToken, hashSecret } from "./token.ts";

// The one code path that creates sessions: SessionService.create and `npm run session:create`.

export interface CreateSessionInput {
  userId: string;
  ipAddress?: string | null;
  userAgent?: string | null;
  ttlSeconds?: number;
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
/** Browsers cap cookie lifetimes at 400 days (RFC 6265bis), so sessions cannot outlive that. */
export const MAX_TTL_SECONDS = 400 * 24 * 60 * 60;

export async function issueSession(
  db: Database,
  config: Config,
  input: CreateSessionInput,
): Promise<CreatedSession> {
  const { userId } = input;
  if (typeof userId !== "string" || userId.trim() === "" || userId.length > MAX_USER_ID_LENGTH) {
    throw new TypeError(`userId must be a non-blank string of at most ${MAX_USER_ID_LENGTH} characters`);
  }
  const ttlSeconds = input.ttlSeconds ?? config.ttlSeconds;
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds <= 0 || ttlSeconds > MAX_TTL_SECONDS) {
    throw new RangeError(`ttlSeconds must be an integer from 1 to ${MAX_TTL_SECONDS}`);
  }
  const { id, secret, token } = generateToken();
  const createdAt = now();
  const expiresAt = new Date(createdAt.getTime() + ttlSeconds * 1000);
  await insertSession(db, {
    id,
    secretHash: await hashSecret(secret),
    userId,
    ipAddress: normalizeIp(input.ipAddress),
    userAgent: (input.userAgent ?? "").slice(0, MAX_USER_AGENT_LENGTH),
    createdAt,
    expiresAt,
  });
  return { id, token, expiresAt: expiresAt.toISOString(), cookie: sessionCookie(config.cookieName, token, ttlSeconds) };
}
