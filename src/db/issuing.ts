import {
  and,
  desc,
  eq,
  exists,
  getTableColumns,
  gt,
  inArray,
  isNotNull,
  isNull,
  ne,
  not,
  notExists,
  or,
  type SQL,
  sql,
} from "drizzle-orm";
import type { StoredFactors } from "../domain/auth-factors.ts";
import type { Instant } from "../domain/clock.ts";
import type { Lifetime } from "../domain/config.ts";
import type { SupportRefusal } from "../domain/refusal.ts";
import { createdReason } from "../domain/upstreams/sign-in.ts";
import { authenticated, reestablishedExpiry, tail } from "./authenticated.ts";
import { bucketNotMoving, moveOf, notMoving, onBucket } from "./buckets.ts";
import { batchNamed, type Database } from "./client.ts";
import type { ContextCheck } from "./client-context.ts";
import { sameDeviceKey } from "./device.ts";
import { eventsOf } from "./events.ts";
import { inOrganization, isLive, isProvenBy, ofOrganization, slidesOf, type TokenProof } from "./liveness.ts";
import { organizationPolicies, sessionEvents, sessions } from "./schema.ts";
import type { BucketShard } from "./shards.ts";
import { endSessions, type Logged, loggedBy, newWrite, recordEvents, type Write, type Writer } from "./writes.ts";

// The two statements that hand out a secret: a new session's row, and a new secret for a live
// session (re-authentication). Each logs its event and answers from it, replay-safe (writes.ts).

export type NewSession = typeof sessions.$inferInsert;

/** What bounds a user's sessions and what a new device is compared with. */
export interface IssuePolicy {
  maxPerUser: number;
  /** Sessions seen (created, active or ended) after this count for "a known device". */
  seenSince: Date;
}

/**
 * Whether any other session of the user seen since `since`, live or ended, had this device
 * (src/domain/device.ts, the context check's rule) in this country: its face is where the
 * session starts, its last seen. The new session itself is left out, so the answer is the same
 * before and after its row exists.
 */
function seenOnDevice(db: Database, bucket: string, session: NewSession, since: Date): SQL<boolean> {
  const { userId, id } = session;
  const face = { browser: session.seenBrowser ?? "", os: session.seenOs ?? "" };
  const country = session.country ?? null;
  return sql<boolean>`(${exists(
    db
      .select({ one: sql`1` })
      .from(sessions)
      .where(
        and(
          eq(sessions.userId, userId),
          sameDeviceKey(sessions.deviceKey, face, country),
          gt(sessions.lastActiveAt, since),
          ne(sessions.id, id),
        ),
      ),
  )} OR ${exists(
    db
      .select({ one: sql`1` })
      .from(sessionEvents)
      .where(
        and(
          eventsOf(bucket, userId),
          sameDeviceKey(sessionEvents.deviceKey, face, country),
          gt(sessionEvents.createdAt, since),
          ne(sessionEvents.sessionId, id),
        ),
      ),
  )})`;
}

/**
 * Stores a new session and its `created` event and, beyond the cap, ends the user's least
 * recently active other live sessions (`evicted`); one batch. Idempotent, so a replay of a
 * batch that did commit neither fails on the primary key, nor logs the creation twice, nor
 * evicts again (the new session is never a candidate, and the others are then within the
 * cap), nor brings back the session if it was ended in between. `stored`: the session was
 * created, by this attempt or the first (its row, or this write's `created` event, exists).
 * A session of an organization is created only if this database holds the organization's policy
 * row, checked in the same batch: `organizationFound` false when it does not, nothing written.
 */
export async function insertSession(
  shard: BucketShard,
  session: NewSession & { reportHash: string },
  writer: Writer,
  policy: IssuePolicy,
  at: Instant,
): Promise<Logged<{ stored: boolean; newDevice: boolean; organizationFound: boolean }>> {
  const write = newWrite(session.createdAt);
  const ours = and(eq(sessions.id, session.id), eq(sessions.secretHash, session.secretHash));
  const evictor = { ...writer, sessionId: session.id };
  const organizationId = session.organizationId ?? null;
  return onBucket(shard, async (db) => {
    const policyRow = db
      .select({ id: organizationPolicies.organizationId })
      .from(organizationPolicies)
      .where(eq(organizationPolicies.organizationId, organizationId ?? ""));
    // No condition on a session outside any organization: its statements stay as they were.
    const allowed = organizationId === null ? undefined : exists(policyRow);
    // Keep the maxPerUser - 1 most recently active others; the new one makes maxPerUser.
    const overCap = inArray(
      sessions.id,
      db
        .select({ id: sessions.id })
        .from(sessions)
        // Support access is not the user's: it neither counts toward their cap nor is evicted. A
        // sign-in counts and evicts its organization's sessions alone (or, outside any, those
        // outside any): a sign-in at one customer, or outside all, never signs the user out at another.
        .where(
          and(
            eq(sessions.userId, session.userId),
            isLive(at),
            ne(sessions.id, session.id),
            isNull(sessions.supportAgent),
            organizationId === null ? isNull(sessions.organizationId) : eq(sessions.organizationId, organizationId),
          ),
        )
        .orderBy(desc(sessions.lastActiveAt), desc(sessions.createdAt), desc(sessions.id))
        // SQLite has no OFFSET without a LIMIT; this one never cuts anything.
        .limit(Number.MAX_SAFE_INTEGER)
        .offset(policy.maxPerUser - 1),
    );
    // A new device keeps its report hash; a known one stores none. Judged once, by the INSERT:
    // the event reads it off the row.
    const reportHash = sql`CASE WHEN ${not(seenOnDevice(db, shard.bucket, session, policy.seenSince))} THEN ${session.reportHash} END`;
    const evicting = allowed ? and(overCap, allowed) : overCap;
    const { stored, logged, move, organization } = await batchNamed(db, {
      inserted: insertUnlessDone(db, shard.bucket, session, write, allowed, { reportHash }),
      recorded: recordEvents(db, "created", and(ours, notExists(loggedBy(db, write))), writer, write, {
        // A bound value either way: a session without an upstream runs the same statement.
        reason: createdReason({
          upstream: session.upstream ?? null,
          upstreamExpiresAt: session.upstreamExpiresAt ?? null,
          expiresAt: session.expiresAt,
        }),
        newDevice: sql<boolean>`${sessions.reportHash} IS NOT NULL`,
        reportHash: sql`${sessions.reportHash}`,
      }),
      stored: db.select({ id: sessions.id }).from(sessions).where(ours),
      evictions: recordEvents(db, "evicted", evicting, evictor, write),
      evicted: endSessions(db, evicting),
      organization: organizationId === null ? null : policyRow,
      ...tail(db, write, shard.bucket),
    });
    const created = logged.find((event) => event.type === "created");
    const answer = {
      stored: stored.length > 0 || created !== undefined,
      newDevice: created?.newDevice === true,
      organizationFound: organization === undefined || organization.length > 0,
    };
    return { answer: { answer, events: logged, db }, move: move[0], blocked: !answer.stored };
  });
}

/**
 * Stores a support session (src/domain/support.ts) and its `created` event, in one batch, only
 * for a user this database knows (a session row or an event in the log) with fewer than
 * `perUser` open support sessions. It evicts nothing: support access never ends the user's
 * own sessions. Replay-safe as insertSession.
 */
export async function insertSupportSession(
  shard: BucketShard,
  session: NewSession,
  writer: Writer,
  perUser: number,
  at: Instant,
): Promise<Logged<{ stored: boolean; refused: SupportRefusal | null }>> {
  const write = newWrite(session.createdAt);
  const ours = and(eq(sessions.id, session.id), eq(sessions.secretHash, session.secretHash));
  return onBucket(shard, async (db) => {
    const known = sql<boolean>`(${exists(
      db
        .select({ one: sql`1` })
        .from(sessions)
        .where(and(eq(sessions.userId, session.userId), ne(sessions.id, session.id))),
    )} OR ${exists(db.select({ one: sql`1` }).from(sessionEvents).where(eventsOf(shard.bucket, session.userId)))})`;
    const open = sql<number>`(SELECT count(*) FROM ${sessions} WHERE ${and(
      eq(sessions.userId, session.userId),
      isLive(at),
      isNotNull(sessions.supportAgent),
      ne(sessions.id, session.id),
    )})`;
    const { stored, why, logged, move } = await batchNamed(db, {
      inserted: insertUnlessDone(db, shard.bucket, session, write, sql`${known} AND ${open} < ${perUser}`),
      recorded: recordEvents(db, "created", and(ours, notExists(loggedBy(db, write))), writer, write),
      stored: db.select({ id: sessions.id }).from(sessions).where(ours),
      why: db
        .select({ known: known.mapWith(Boolean).as("known"), open: open.mapWith(Number).as("open") })
        .from(sql`(SELECT 1)`),
      ...tail(db, write, shard.bucket),
    });
    const created = stored.length > 0 || logged.some((event) => event.type === "created");
    const reasons = why[0] ?? { known: false, open: 0 };
    let refused: SupportRefusal | null = null;
    if (!created && !reasons.known) refused = "unknown_user";
    else if (!created && reasons.open >= perUser) refused = "too_many_open";
    const answer = { stored: created, refused };
    return { answer: { answer, events: logged, db }, move: move[0], blocked: !created };
  });
}

/**
 * INSERT … SELECT of the new session's row, guarded twice: by the bucket's move state, and
 * by `write` having logged nothing yet (else the first attempt of this batch committed, and
 * the session may since have been ended by another request: a replay must not bring it
 * back), and by `allowed` when given. `ON CONFLICT (id) DO NOTHING`: nothing either on an id
 * that exists (a collision). `judged`: columns whose value the statement itself decides.
 */
function insertUnlessDone(
  db: Database,
  bucket: string,
  session: NewSession,
  write: Write,
  allowed?: SQL,
  judged: Partial<Record<keyof NewSession, SQL>> = {},
) {
  const values = Object.entries(getTableColumns(sessions)).map(
    ([key, column]) =>
      judged[key as keyof NewSession] ??
      sql`${sql.param(session[key as keyof NewSession] ?? column.default ?? null, column)}`,
  );
  const guard = and(bucketNotMoving(db, bucket), notExists(loggedBy(db, write)), allowed);
  return db
    .insert(sessions)
    .select(sql`SELECT ${sql.join(values, sql`, `)} WHERE ${guard}`)
    .onConflictDoNothing({ target: sessions.id });
}

/**
 * What a re-authentication records: the new secret's hash, the factors, the assurance level and,
 * after the provider's fresh sign-in, which must be the session's own, its `sid` and
 * `session_expiry`; its `auth_time`, after the provider's hold, lifts it.
 */
export interface Reauthentication {
  secretHash: string;
  factors: StoredFactors;
  assuranceLevel: number | null;
  upstream?: {
    provider: string;
    subject: string;
    sid: string | null;
    sessionExpiry: Date | null;
    authTime: Date | null;
  } | null;
}

/**
 * Gives the token's live session a new secret and records the new factors (merged over the
 * old, factor by factor), in one batch: the `reauthenticated` event is logged while the old
 * secret still proves the session, then the row changes. The answer is this write's event:
 * a replayed batch finds the old secret gone and changes nothing, yet answers the same, so the
 * caller gets the new token it was about to be given, never a third one. Null when the token
 * did not prove a live session, `another_sign_in` when it did but `change.upstream` is not the
 * session's own sign-in, `held_by_upstream` when its provider holds it and `change.upstream` is
 * no sign-in there after the hold: nothing changed.
 */
export async function reauthenticateSession(
  shard: BucketShard,
  proof: TokenProof,
  change: Reauthentication,
  writer: Writer,
  at: Instant,
  check: ContextCheck | null,
  organization: string | null = null,
): Promise<
  Logged<
    | { expiresAt: Date; upstreamExpiresAt: Date | null; lifetime: Lifetime | null }
    | null
    | "support"
    | "another_sign_in"
    | "held_by_upstream"
  >
> {
  const write = newWrite(at.now);
  const latest = Math.max(...Object.values(change.factors));
  // The user just proved who they are: a change of context is only logged, and a hold lifted.
  const logged = check && { ...check, logOnly: true };
  return onBucket(shard, async (db) => {
    // A key limited to an organization re-authenticates its sessions alone: another's is as unproven.
    const proven =
      organization === null ? isProvenBy(proof, at) : (and(isProvenBy(proof, at), inOrganization(organization)) as SQL);
    const { upstream } = change;
    // Only a re-authentication with the provider's sign-in compares it: one without reads nothing more.
    const itsOwn =
      upstream &&
      sql`(${sessions.upstream} IS ${upstream.provider} AND ${sessions.upstreamSubject} IS ${upstream.subject})`;
    // The provider's hold yields only to its own sign-in after it (itsOwn checks whose).
    const authTime = upstream?.authTime;
    const liftable = or(
      isNull(sessions.upstreamHeldAt),
      authTime ? sql`${authTime.getTime()} > ${sessions.upstreamHeldAt}` : undefined,
    ) as SQL;
    // Support access is time-boxed: it is never given a new secret (src/domain/support.ts).
    const eligible = and(proven, isNull(sessions.supportAgent), itsOwn ?? undefined, liftable);
    // Its own UPDATE records the context: the head's would change the same row a statement earlier.
    const head = authenticated(db, { proof, at, check: logged, writer, write }, false);
    const { row, events, move } = await batchNamed(db, {
      contextEvents: head.builders().contextEvents,
      recorded: recordEvents(db, "reauthenticated", eligible, writer, write, {
        assuranceLevel: change.assuranceLevel,
        // Read before the batch's UPDATE clears it: this re-authentication lifts a context hold.
        reason: sql<string>`CASE WHEN ${sessions.held} THEN 'hold' END`,
      }),
      changed: db
        .update(sessions)
        .set({
          ...head.seen(),
          secretHash: change.secretHash,
          authProofs: sql`json_patch(coalesce(${sessions.authProofs}, '{}'), ${JSON.stringify(change.factors)})`,
          assuranceLevel: change.assuranceLevel ?? sessions.assuranceLevel,
          authenticatedAt: sql`max(${sessions.authenticatedAt}, ${latest})`,
          lastActiveAt: at.now,
          held: false,
          upstreamHeldAt: null,
          // A sign-in without a `sid` keeps the stored one: the session-revoked sent back names it.
          ...(upstream?.sid != null && { upstreamSid: upstream.sid }),
          ...(upstream?.sessionExpiry && {
            upstreamExpiresAt: upstream.sessionExpiry,
            expiresAt: reestablishedExpiry(proof, at, upstream.sessionExpiry),
          }),
        })
        .where(and(eligible, notMoving())),
      // The session with its new secret, or the support session, another sign-in's session or
      // one its provider holds that the token proved, untouched.
      row: db
        .select({
          expiresAt: sessions.expiresAt,
          upstreamExpiresAt: sessions.upstreamExpiresAt,
          supportAgent: sessions.supportAgent,
          itsOwn: sql<number>`${itsOwn ?? sql`1`}`.as("its_own"),
          liftable: sql<number>`${liftable}`.as("liftable"),
          // A member's cookie lasts as its organization's policy lets the session live.
          ...(proof.member && {
            slides: sql<number>`coalesce((SELECT ${slidesOf(at)} FROM ${ofOrganization}), ${at.slides ? 1 : 0})`.as(
              "slides",
            ),
            maxLifetimeSeconds:
              sql<number>`coalesce((SELECT ${organizationPolicies.maxLifetimeSeconds} FROM ${ofOrganization}), ${at.maxLifetimeMs / 1000})`.as(
                "max_lifetime_seconds",
              ),
          }),
        })
        .from(sessions)
        .where(
          and(
            eq(sessions.id, proof.id),
            or(
              eq(sessions.secretHash, change.secretHash),
              and(proven, isNotNull(sessions.supportAgent)),
              itsOwn ? and(proven, not(itsOwn)) : undefined,
              and(proven, not(liftable)),
            ),
          ),
        ),
      events: loggedBy(db, write),
      move: moveOf(db, shard.bucket),
    });
    const reauthenticated = events.some((event) => event.type === "reauthenticated");
    const found = row[0];
    const answer = found?.supportAgent
      ? "support"
      : reauthenticated && found
        ? {
            expiresAt: found.expiresAt,
            upstreamExpiresAt: found.upstreamExpiresAt,
            lifetime:
              found.maxLifetimeSeconds == null
                ? null
                : { slidingTtl: Boolean(found.slides), maxLifetimeSeconds: found.maxLifetimeSeconds },
          }
        : found
          ? found.itsOwn && !found.liftable
            ? "held_by_upstream"
            : "another_sign_in"
          : null;
    return { answer: { answer, events, db }, move: move[0], blocked: !reauthenticated };
  });
}
