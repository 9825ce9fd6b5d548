import { eq, type SQL, sql } from "drizzle-orm";
import type { CallerColumns } from "../domain/caller-view.ts";
import type { TokenCarrier } from "../domain/carrier.ts";
import { StaleSignIn } from "../domain/refusal.ts";
import { millis, type When } from "./compiled.ts";
import { organizationPolicies, sessions } from "./schema.ts";

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
  /**
   * Its secret is a member's (src/domain/token.ts): the session is an organization's, whose
   * policy may slide, step up or judge a change where no var does (src/domain/clock.ts `forMember`).
   */
  member: boolean;
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
  /** SESSION_SLIDING_TTL: a member's session slides unless its organization's policy says otherwise. */
  slides: boolean;
}

/** Activity is written at most this often per session, so reads rarely write. */
export const ACTIVITY_WRITE_INTERVAL_MS = 5 * 60 * 1000;

/**
 * The one rule for "this row is a live session": not expired and, with an idle timeout, active
 * since its cutoff. A member's session (sessions.organization_id) is held to its organization's
 * policy as it is now, read in the same statement (`memberLive`); a session outside any
 * organization reads nothing more: SQLite evaluates a CASE's branches lazily, so its row costs
 * one column compared with NULL.
 */
export function isLive(at: Pick<At, "now" | "idleCutoff" | "slides">): SQL {
  const now = millis(at.now);
  return sql`(${sessions.expiresAt} > ${now} AND CASE WHEN ${sessions.organizationId} IS NULL THEN ${idleOf(at)} ELSE ${memberLive(at, idleOf(at))} END)`;
}

/** With an idle timeout, active since its cutoff; without, always (`1`). */
function idleOf(at: Pick<At, "idleCutoff">): SQL {
  return at.idleCutoff ? sql`${sessions.lastActiveAt} > ${millis(at.idleCutoff)}` : sql`1`;
}

/**
 * `isLive` for the row a token names, whose token says whether it is a member's (src/domain/token.ts):
 * that rule alone, so a session outside any organization compiles the vars' rule as before
 * organizations, and the row must be of the kind its token says.
 */
function isLiveAs(member: boolean, at: Pick<At, "now" | "idleCutoff" | "slides">): SQL {
  const rule = member
    ? sql`${sessions.organizationId} IS NOT NULL AND ${memberLive(at, idleOf(at))}`
    : sql`${sessions.organizationId} IS NULL AND ${idleOf(at)}`;
  return sql`(${sessions.expiresAt} > ${millis(at.now)} AND ${rule})`;
}

/** The policy row of the session's organization, for a correlated subquery: its primary key, one row or none. */
export const ofOrganization = sql`${organizationPolicies} WHERE ${organizationPolicies.organizationId} = ${sessions.organizationId}`;

/**
 * A member's session is live under its organization's policy (docs/organization-policy.md), so
 * that a change applies at the next request, with no sign-in: its idle timeout (0: none; null:
 * the var's, `idle`), its maximum lifetime from creation, and its lifetime, from the last
 * renewal when it slides (`slidesOf`: the activity write renews at `last_active_at`), else from
 * creation, never longer than the session was issued with. No policy row (the organization was
 * removed): not live. A lifetime of 0: ended by its organization's context policy before a
 * member's end deleted its row (a row no `create` writes, kept until its `expires_at`).
 */
function memberLive(at: Pick<At, "now" | "slides">, idle: SQL): SQL {
  const now = millis(at.now);
  const p = organizationPolicies;
  const { lastActiveAt, createdAt, ttlSeconds } = sessions;
  const from = sql`CASE WHEN ${slidesOf(at)} THEN ${lastActiveAt} ELSE ${createdAt} END`;
  return sql`coalesce((SELECT ${ttlSeconds} > 0 AND CASE WHEN ${p.idleTimeoutSeconds} IS NULL THEN ${idle} ELSE (${p.idleTimeoutSeconds} = 0 OR ${lastActiveAt} > ${now} - ${p.idleTimeoutSeconds} * 1000) END AND (${p.maxLifetimeSeconds} IS NULL OR ${createdAt} + ${p.maxLifetimeSeconds} * 1000 > ${now}) AND (${p.ttlSeconds} IS NULL OR ${from} + min(${ttlSeconds}, ${p.ttlSeconds}) * 1000 > ${now}) FROM ${ofOrganization}), 0)`;
}

/** A member's session slides: its organization's policy says so, or says nothing where the deployment slides (a constant of the text). */
export function slidesOf(at: Pick<At, "slides">): SQL {
  return sql`coalesce(${organizationPolicies.slidingTtl}, ${sql.raw(at.slides ? "1" : "0")})`;
}

/** The carrier the session must not have: a browser's cookie-only token proves nothing as Bearer. */
const REFUSES = { bearer: "cookie", cookie: "bearer" } as const;

/**
 * The token names a live session and came by a carrier it accepts: id, secret hash, liveness,
 * carrier. Enough only to register or renew a binding.
 */
export function isTokenOf(proof: TokenProof, at: At): SQL {
  const carrier = proof.carrier ? sql` AND ${sessions.carrier} IS NOT ${REFUSES[proof.carrier]}` : sql``;
  // A member's token is a member's (`isLiveAs`): one issued to a member before its secret said so
  // would otherwise be judged without what its organization's policy turns on.
  return sql`(${sessions.id} = ${proof.id} AND ${sessions.secretHash} = ${proof.secretHash} AND ${isLiveAs(proof.member, at)}${carrier})`;
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

/** The caller's row as the head reads it (src/domain/caller-view.ts `CallerColumns`), and flags of the batch. */
export type Caller = CallerColumns & {
  /** A change of its context this batch could not record: its bucket is frozen for a move. */
  contextUnrecorded: boolean;
  /** With step-up on, the instant (epoch ms) its last authentication must be after (`stepUpCutoffOf`); else null. */
  stepUpCutoff: number | null;
};

/**
 * With step-up on, the caller's last authentication is too old to end another session: the step-up
 * age it is older than (its cutoff's distance from `now`); else null.
 */
export function staleSignIn(caller: Caller | null, now: Date): StaleSignIn | null {
  if (caller === null || caller.stepUpCutoff === null || caller.authenticatedAt.getTime() > caller.stepUpCutoff)
    return null;
  return new StaleSignIn(Math.round((now.getTime() - caller.stepUpCutoff) / 1000));
}

/**
 * With step-up on (SESSION_STEP_UP_MAX_AGE_SECONDS), the instant the caller's last
 * authentication must be after: the var's cutoff, or a member's by its organization's step-up
 * age when it sets one (0: none, the epoch). Only where the deployment has step-up or the caller
 * is a member (src/domain/clock.ts `forMember`: its cutoff is then the epoch where the var has
 * none), so that a session outside pays nothing where the deployment has none.
 */
export function stepUpCutoffOf(
  proof: Pick<TokenProof, "member">,
  at: Pick<At, "now" | "stepUpCutoff">,
): SQL<number> | null {
  if (at.stepUpCutoff === null) return null;
  const cutoff = millis(at.stepUpCutoff);
  if (!proof.member) return sql<number>`${cutoff}`;
  const age = organizationPolicies.stepUpMaxAgeSeconds;
  return sql<number>`coalesce((SELECT CASE WHEN ${age} = 0 THEN 0 ELSE ${millis(at.now)} - ${age} * 1000 END FROM ${ofOrganization}), ${cutoff})`;
}

/**
 * With step-up on: the token's session authenticated after its cutoff. Part of the condition
 * that ends other sessions, so a stale caller ends nothing, in the same batch.
 */
export function isFreshCaller(proof: TokenProof, at: At): SQL | undefined {
  const cutoff = stepUpCutoffOf(proof, at);
  if (cutoff === null) return undefined;
  // A flat template: cheaper to render than the column's own mapping of a Date.
  return sql`EXISTS (SELECT 1 FROM ${sessions} WHERE ${sessions.id} = ${proof.id} AND ${sessions.secretHash} = ${proof.secretHash} AND ${sessions.authenticatedAt} > ${cutoff})`;
}

/**
 * A session of `organization` (a key limited to it acts on those alone); null: no condition, the
 * statement as it is for every other caller.
 */
export function inOrganization(organization: string | null): SQL | undefined {
  return organization === null ? undefined : eq(sessions.organizationId, organization);
}
