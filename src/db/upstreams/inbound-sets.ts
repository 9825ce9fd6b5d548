import { and, eq, inArray, lte, notExists, or, type SQL, sql } from "drizzle-orm";
import type { Instant } from "../../domain/clock.ts";
import { UPSTREAM_CLOCK_SKEW_SECONDS } from "../../domain/upstreams/config.ts";
import type { SetAct } from "../../domain/upstreams/inbound.ts";
import { bucketNotMoving, moveOf, onBucket } from "../buckets.ts";
import { batchNamed, type Database } from "../client.ts";
import { isLive } from "../liveness.ts";
import { sessions, ssfReceivedSets } from "../schema.ts";
import type { BucketShard } from "../shards.ts";
import { endSessions, type Logged, loggedBy, newWrite, recordEvents, type Writer } from "../writes.ts";

// A signed token from an upstream (an inbound Security Event Token, a back-channel logout
// token, a revocation's JWT), acted on once: the sessions it ends (or holds, or logs on) and
// the (issuer, jti) that remembers it are written in one batch, on the database of the user it
// names, so a resent token finds itself remembered and does nothing.

export interface InboundSet {
  issuer: string;
  jti: string;
}

/**
 * Whose sessions it reaches: every live one of `userId`, or the one `sessionId` (of `userId` when
 * given) or, with `upstreamSid`, the one of `userId` signed in through that upstream with that
 * `sid`; with `upstream`, only those signed in through it (as that subject and that `sid`,
 * when given); only those created by `issuedAt` (plus the skew), of which the token speaks.
 * `heldSince`: a hold's instant, which only the upstream's sign-in after it lifts. Of
 * `organizationId`'s sessions alone, when given: in the same statement, whatever else it names.
 */
export interface SetTarget {
  userId: string | null;
  /** An organization's provider's: only that organization's sessions (null or absent: the var's entry, any session). */
  organizationId?: string | null;
  sessionId: string | null;
  upstreamSid?: { upstream: string; sid: string };
  upstream?: { name: string; subject: string | null; sid: string | null };
  issuedAt: Date;
  heldSince?: Date;
}

/** The one session the target names, by this service's id or the upstream's `sid`; undefined: every one. */
function namedSession({ sessionId, upstreamSid }: SetTarget): SQL | undefined {
  const ours = sessionId === null ? undefined : eq(sessions.id, sessionId);
  if (upstreamSid === undefined) return ours;
  const theirs = and(eq(sessions.upstream, upstreamSid.upstream), eq(sessions.upstreamSid, upstreamSid.sid));
  // An id not of this service reaches only the session signed in with that `sid`, none when
  // there is none: a provider may echo back the session-revoked this service sent it for a
  // sign-out here, which must not end the user's other sessions.
  return ours === undefined ? theirs : or(ours, theirs);
}

/** The SET is not remembered yet: the guard of its ending, evaluated before the batch remembers it. */
function notRemembered(db: Database, set: InboundSet) {
  return notExists(
    db
      .select({ one: sql`1` })
      .from(ssfReceivedSets)
      .where(and(eq(ssfReceivedSets.issuer, set.issuer), eq(ssfReceivedSets.jti, set.jti))),
  );
}

/**
 * Remembers the SET, unless the bucket is being moved: then nothing of the batch acts
 * (its endings have the same guard) and the SET is answered 503, for its transmitter to resend.
 */
function remember(db: Database, set: InboundSet, bucket: string, at: Date) {
  // The WHERE also keeps SQLite from reading ON CONFLICT as a join's ON.
  // Every column, in the table's order (an INSERT … SELECT names them all): no subject recorded.
  const row = sql`SELECT ${set.issuer}, ${set.jti}, ${at.getTime()}, ${bucket}, NULL WHERE ${bucketNotMoving(db, bucket)}`;
  return db.insert(ssfReceivedSets).select(row).onConflictDoNothing();
}

/** The event each act logs on a session it reaches. */
const LOGGED_AS = { end: "ended_by_upstream", hold: "held_by_upstream", log: "signaled_by_upstream" } as const;

/**
 * Ends the target's live sessions (logged `ended_by_upstream` with `reason`), or holds them
 * until the user signs in again (`held_by_upstream`), or only logs on them
 * (`signaled_by_upstream`), unless this SET was received before; remembers it either way. One
 * batch: the acts come first, guarded by the SET not being remembered, and the batch
 * remembers it last, so of two deliveries only the first acts, and the replay of a batch whose
 * answer was lost acts on nothing new. Answers the sessions this write reached, by either attempt.
 */
export function actOnSessionsForSet(
  shard: BucketShard,
  set: InboundSet,
  target: SetTarget,
  act: SetAct,
  reason: string,
  writer: Writer,
  at: Instant,
): Promise<Logged<number>> {
  const write = newWrite(at.now);
  const { upstream, issuedAt, heldSince = at.now } = target;
  const ending = and(
    target.userId === null ? undefined : eq(sessions.userId, target.userId),
    target.organizationId == null ? undefined : eq(sessions.organizationId, target.organizationId),
    upstream === undefined ? undefined : eq(sessions.upstream, upstream.name),
    upstream?.subject == null ? undefined : eq(sessions.upstreamSubject, upstream.subject),
    upstream?.sid == null ? undefined : eq(sessions.upstreamSid, upstream.sid),
    lte(sessions.createdAt, new Date(issuedAt.getTime() + UPSTREAM_CLOCK_SKEW_SECONDS * 1000)),
    isLive(at),
  );
  return onBucket(shard, async (db) => {
    const matching = and(ending, namedSession(target), notRemembered(db, set));
    const { logged, move } = await batchNamed(db, {
      recorded: recordEvents(db, LOGGED_AS[act], matching, writer, write, { reason }),
      ended: act === "end" ? endSessions(db, matching) : null,
      // The context check's hold: every use but a sign-out is refused with the RFC 9470
      // challenge until `reauthenticate` with the upstream's sign-in after the latest hold lifts it.
      held:
        act === "hold"
          ? db
              .update(sessions)
              .set({
                held: true,
                upstreamHeldAt: sql`max(coalesce(${sessions.upstreamHeldAt}, 0), ${heldSince.getTime()})`,
              })
              .where(matching)
          : null,
      remembered: remember(db, set, shard.bucket, write.at),
      logged: loggedBy(db, write),
      move: moveOf(db, shard.bucket),
    });
    return { answer: { answer: logged.length, events: logged, db }, move: move[0], blocked: logged.length === 0 };
  });
}

/**
 * Forgets up to `limit` inbound SETs received at `before` or earlier; returns how many went.
 * Past their maximum age a resent SET is refused as too old, so it need not be known.
 * The table holds about a day of SETs: no index on `received_at` for this.
 */
export async function purgeInboundSets(db: Database, before: Date, limit: number): Promise<number> {
  const old = db
    .select({ rowid: sql`rowid` })
    .from(ssfReceivedSets)
    .where(lte(ssfReceivedSets.receivedAt, before))
    .limit(limit);
  const result = await db.delete(ssfReceivedSets).where(inArray(sql`rowid`, old)).run();
  return result.meta.changes;
}

/**
 * Records a token for one subject, in the bucket its id was placed in: the first request that
 * names it records it for that subject, and the answer is whether the record is this subject's. So a token
 * id acts for one subject only, wherever that subject's user is: a global token revocation's
 * JWT, which binds no subject of its own, and a logout token's `jti`, which the memory on the
 * user's database alone would let act again on another database; a retry for the same
 * subject goes on. Held back by a move of the bucket: BucketMoving, nothing recorded.
 */
export function recordJtiFor(shard: BucketShard, token: InboundSet, subject: string, at: Date): Promise<boolean> {
  return onBucket(shard, async (db) => {
    const row = sql`SELECT ${token.issuer}, ${token.jti}, ${at.getTime()}, ${shard.bucket}, ${subject} WHERE ${bucketNotMoving(db, shard.bucket)}`;
    const { recorded, move } = await batchNamed(db, {
      // The WHERE also keeps SQLite from reading ON CONFLICT as a join's ON.
      inserted: db.insert(ssfReceivedSets).select(row).onConflictDoNothing(),
      recorded: db
        .select({ subject: ssfReceivedSets.subject })
        .from(ssfReceivedSets)
        .where(and(eq(ssfReceivedSets.issuer, token.issuer), eq(ssfReceivedSets.jti, token.jti))),
      move: moveOf(db, shard.bucket),
    });
    return { answer: recorded[0]?.subject === subject, move: move[0], blocked: recorded.length === 0 };
  });
}
