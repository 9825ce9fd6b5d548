import { eq, type SQL, sql } from "drizzle-orm";
import type { CallerColumns } from "../domain/caller-view.ts";
import type { TokenCarrier } from "../domain/carrier.ts";
import type { Instant } from "../domain/clock.ts";
import { millis, type When } from "./compiled.ts";
import { sessions } from "./schema.ts";

// The rules a statement judges a row and a token by, as SQL conditions: a token is checked
// inside the statement that acts on it, so authentication costs no round trip of its own. The
// conditions every request builds are flat templates: drizzle turns one into SQL for a
// fraction of the CPU of the same condition nested of and()/eq() (BENCHMARKS.md, Reading).

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

/**
 * `Instant` as the statements read it: each instant a `When`, so that a statement rendered once
 * (src/db/compiled.ts) takes a placeholder for its epoch milliseconds.
 */
export interface At {
  now: When;
  idleCutoff: When | null;
  slidingMaxLifetimeMs: number | null;
  stepUpCutoff: When | null;
}

/** Activity is written at most this often per session, so reads rarely write. */
export const ACTIVITY_WRITE_INTERVAL_MS = 5 * 60 * 1000;

/** The one rule for "this row is a live session". */
export function isLive(at: Pick<At, "now" | "idleCutoff">): SQL {
  const now = millis(at.now);
  return at.idleCutoff
    ? sql`(${sessions.expiresAt} > ${now} AND ${sessions.lastActiveAt} > ${millis(at.idleCutoff)})`
    : sql`${sessions.expiresAt} > ${now}`;
}

/** The carrier the session must not have: a browser's cookie-only token proves nothing as Bearer. */
const REFUSES = { bearer: "cookie", cookie: "bearer" } as const;

/**
 * The token names a live session and came by a carrier it accepts: id, secret hash, liveness,
 * carrier. Enough only to register or renew a binding.
 */
export function isTokenOf(proof: TokenProof, at: At): SQL {
  const carrier = proof.carrier ? sql` AND ${sessions.carrier} IS NOT ${REFUSES[proof.carrier]}` : sql``;
  return sql`(${sessions.id} = ${proof.id} AND ${sessions.secretHash} = ${proof.secretHash} AND ${isLive(at)}${carrier})`;
}

/**
 * The one rule for "this token proves a live session": it names one, by a carrier the session
 * accepts, and the session is not device-bound or its live bound cookie came with the token.
 */
export function isProvenBy(proof: TokenProof, at: At): SQL {
  const now = millis(at.now);
  const bound = proof.boundHash
    ? sql` OR (${sessions.boundCookieHash} = ${proof.boundHash} AND ${sessions.boundCookieExpiresAt} > ${now}) OR (${sessions.previousBoundCookieHash} = ${proof.boundHash} AND ${sessions.previousBoundCookieExpiresAt} > ${now})`
    : sql``;
  return sql`(${isTokenOf(proof, at)} AND (${sessions.dbscKeyThumbprint} IS NULL${bound}))`;
}

/**
 * The token's user, as a subquery: no row when the token does not prove a live session, or
 * its session is held (it then reads and ends nothing).
 */
export function ownerOf(proof: TokenProof, at: At): SQL {
  return sql`(SELECT ${sessions.userId} FROM ${sessions} WHERE ${isProvenBy(proof, at)} AND ${sessions.held} = 0)`;
}

/**
 * The token's session is the user's own, not support access: part of every condition that ends
 * the user's other sessions, so a support session ends none, in the same statement.
 */
export function isUsersOwn(proof: TokenProof): SQL {
  return sql`NOT EXISTS (SELECT 1 FROM ${sessions} WHERE ${sessions.id} = ${proof.id} AND ${sessions.supportAgent} IS NOT NULL)`;
}

export function isLiveSessionOfCaller(proof: TokenProof, at: At): SQL {
  return sql`(${sessions.userId} IN ${ownerOf(proof, at)} AND ${isLive(at)})`;
}

/** The caller's row as the head reads it (src/domain/caller-view.ts `CallerColumns`), and one flag of the batch. */
export type Caller = CallerColumns & {
  /** A change of its context this batch could not record: its bucket is frozen for a move. */
  contextUnrecorded: boolean;
};

/** With step-up on, the caller's last authentication is too old to end another session. */
export function isStale(caller: Caller | null, at: Instant): boolean {
  return caller !== null && at.stepUpCutoff !== null && caller.authenticatedAt <= at.stepUpCutoff;
}

/**
 * With step-up on: the token's session authenticated after the cutoff. Part of the condition
 * that ends other sessions, so a stale caller ends nothing, in the same batch.
 */
export function isFreshCaller(proof: TokenProof, at: At): SQL | undefined {
  if (at.stepUpCutoff === null) return undefined;
  // A flat template: cheaper to render than the column's own mapping of a Date.
  return sql`EXISTS (SELECT 1 FROM ${sessions} WHERE ${sessions.id} = ${proof.id} AND ${sessions.secretHash} = ${proof.secretHash} AND ${sessions.authenticatedAt} > ${millis(at.stepUpCutoff)})`;
}

/**
 * A session of `organization` (a key limited to it acts on those alone); null: no condition, the
 * statement as it is for every other caller.
 */
export function inOrganization(organization: string | null): SQL | undefined {
  return organization === null ? undefined : eq(sessions.organizationId, organization);
}
