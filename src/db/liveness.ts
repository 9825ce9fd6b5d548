import { and, eq, exists, gt, inArray, isNull, lte, ne, or, type SQL, sql } from "drizzle-orm";
import type { StoredProofs } from "../domain/auth-proofs.ts";
import type { TokenCarrier } from "../domain/carrier.ts";
import type { Instant } from "../domain/clock.ts";
import { notMoving } from "./buckets.ts";
import type { Database } from "./client.ts";
import { sessions } from "./schema.ts";

// The rules a statement judges a row and a token by, as SQL conditions: a token is checked
// inside the statement that acts on it, so authentication costs no round trip of its own.

/** A well-formed token, reduced to what is compared with the table. */
export interface TokenProof {
  id: string;
  secretHash: string;
  /**
   * SHA-256 of the bound cookie that came with the token, if any: a device-bound session
   * is proven only with its live one.
   */
  boundHash?: string | null;
  /** What carried it: a session says which it accepts (src/domain/carrier.ts). */
  carrier: TokenCarrier;
}

/** Activity is written at most this often per session, so reads rarely write. */
export const ACTIVITY_WRITE_INTERVAL_MS = 5 * 60 * 1000;

/** The one rule for "this row is a live session". */
export function isLive(at: Instant): SQL | undefined {
  return and(gt(sessions.expiresAt, at.now), at.idleCutoff ? gt(sessions.lastActiveAt, at.idleCutoff) : undefined);
}

/** The token names a live session: id, secret hash, liveness. Enough only to renew a binding. */
export function isTokenOf(proof: TokenProof, at: Instant): SQL | undefined {
  return and(eq(sessions.id, proof.id), eq(sessions.secretHash, proof.secretHash), isLive(at));
}

/** The session accepts what carried the token: a browser's cookie-only token proves nothing as Bearer. */
function acceptsCarrier(carrier: TokenCarrier): SQL | undefined {
  if (carrier === null) return undefined;
  return or(isNull(sessions.carrier), ne(sessions.carrier, carrier === "bearer" ? "cookie" : "bearer"));
}

/**
 * The one rule for "this token proves a live session": it names one, it came by a carrier the
 * session accepts, and the session is not device-bound or its live bound cookie came with the token.
 */
export function isProvenBy(proof: TokenProof, at: Instant): SQL | undefined {
  const bound = proof.boundHash
    ? or(
        and(eq(sessions.boundCookieHash, proof.boundHash), gt(sessions.boundCookieExpiresAt, at.now)),
        and(eq(sessions.previousBoundCookieHash, proof.boundHash), gt(sessions.previousBoundCookieExpiresAt, at.now)),
      )
    : undefined;
  return and(isTokenOf(proof, at), acceptsCarrier(proof.carrier), or(isNull(sessions.dbscKeyThumbprint), bound));
}

/**
 * The token's user, as a subquery: no row when the token does not prove a live session, or
 * its session is held for step-up by a context change (it then reads and ends nothing).
 */
export function ownerOf(db: Database, proof: TokenProof, at: Instant) {
  return db
    .select({ userId: sessions.userId })
    .from(sessions)
    .where(and(isProvenBy(proof, at), eq(sessions.contextStepUp, false)));
}

export function isLiveSessionOfCaller(db: Database, proof: TokenProof, at: Instant): SQL | undefined {
  return and(inArray(sessions.userId, ownerOf(db, proof, at)), isLive(at));
}

/** The token's live session as the caller: who, until when, and how and when they last authenticated. */
export function selectCaller(db: Database, proof: TokenProof, at: Instant) {
  return db
    .select({
      id: sessions.id,
      userId: sessions.userId,
      expiresAt: sessions.expiresAt,
      authenticatedAt: sessions.authenticatedAt,
      authProofs: sessions.authProofs,
      assuranceLevel: sessions.assuranceLevel,
      contextStepUp: sessions.contextStepUp,
    })
    .from(sessions)
    .where(isProvenBy(proof, at));
}

export type Caller = {
  id: string;
  userId: string;
  expiresAt: Date;
  authenticatedAt: Date;
  authProofs: StoredProofs | null;
  assuranceLevel: number | null;
  /** Held by a context change: refused everything but its own logout until `reauthenticate`. */
  contextStepUp: boolean;
};

/** With step-up on, the caller's last authentication is too old to end another session. */
export function isStale(caller: Caller | null, at: Instant): boolean {
  return caller !== null && at.stepUpCutoff !== null && caller.authenticatedAt <= at.stepUpCutoff;
}

/**
 * With step-up on: the token's session authenticated after the cutoff. Part of the condition
 * that ends other sessions, so a stale caller ends nothing, in the same batch.
 */
export function isFreshCaller(db: Database, proof: TokenProof, at: Instant): SQL | undefined {
  if (at.stepUpCutoff === null) return undefined;
  return exists(
    db
      .select({ one: sql`1` })
      .from(sessions)
      .where(
        and(
          eq(sessions.id, proof.id),
          eq(sessions.secretHash, proof.secretHash),
          gt(sessions.authenticatedAt, at.stepUpCutoff),
        ),
      ),
  );
}

/** With a sliding lifetime: now + the session's own TTL, never past creation + the maximum lifetime. */
function renewedExpiry(at: Instant, maxLifetimeMs: number): SQL<Date> {
  return sql`min(${at.now.getTime()} + ${sessions.ttlSeconds} * 1000, ${sessions.createdAt} + ${maxLifetimeMs})`;
}

/**
 * Refreshes the caller's last activity when it is older than the write interval, and with
 * a sliding lifetime renews its expiry in the same UPDATE.
 */
export function touch(db: Database, proof: TokenProof, at: Instant) {
  const stale = new Date(at.now.getTime() - ACTIVITY_WRITE_INTERVAL_MS);
  const sliding = at.slidingMaxLifetimeMs;
  return db
    .update(sessions)
    .set({ lastActiveAt: at.now, ...(sliding === null ? {} : { expiresAt: renewedExpiry(at, sliding) }) })
    .where(and(isProvenBy(proof, at), lte(sessions.lastActiveAt, stale), notMoving(db)));
}
