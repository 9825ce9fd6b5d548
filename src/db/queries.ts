import {
  and,
  desc,
  eq,
  exists,
  getTableColumns,
  gt,
  gte,
  inArray,
  isNull,
  lt,
  lte,
  ne,
  not,
  notExists,
  or,
  type SQL,
  type SQLWrapper,
  sql,
} from "drizzle-orm";
import type { SelectedFields } from "drizzle-orm/sqlite-core";
import type { StoredProofs } from "../domain/auth-proofs.ts";
import type { Instant } from "../domain/clock.ts";
import { BucketMoving } from "../domain/errors.ts";
import type { ListedSession } from "../domain/session-view.ts";
import { RANDOM_LENGTH } from "../domain/token.ts";
import type { Database } from "./client.ts";
import {
  type BucketMoveRow,
  bucketMoves,
  type EventType,
  firstEventId,
  type SessionEventRow,
  sessionEvents,
  sessions,
} from "./schema.ts";
import type { Place } from "./shards.ts";

// Every statement the service runs. Each exported operation is exactly one D1 round trip:
// authentication travels inside the statement (as a subquery) or in the same batch, and
// a batch runs as one transaction, so its statements see one consistent table.
//
// A transient error is retried once by replaying the batch (src/db/binding.ts), and the
// first attempt may have committed with only its answer lost. So a write never answers
// from what its own attempt changed (a replay changes nothing): it tags the events it
// writes with its `Write` (bound into the batch, so the same on the replay) and answers
// from the events carrying it, read back at the end of the batch: what either attempt did.
//
// A bucket can be moved to another database while the service runs (src/db/moves.ts). Every
// per-user batch also reads its bucket's move state, and every write is guarded by the
// state of its row's bucket, in the same transaction: `onBucket` turns the state into the
// answer, a 503 `moving`, or the same operation on the database the bucket went to.

/** A well-formed token, reduced to what is compared with the table. */
export interface TokenProof {
  id: string;
  secretHash: string;
  /**
   * SHA-256 of the bound cookie that came with the token, if any: a device-bound session
   * is proven only with its live one.
   */
  boundHash?: string | null;
}

/** Who is acting, for the security log, and whether the events it causes also go to the events queue. */
export interface Actor {
  sessionId: string | null;
  ipAddress: string | null;
  /** The events queue is configured: events are written pending delivery, for the outbox to send. */
  queued: boolean;
}

/**
 * What a write answers, and the events it logged: the caller hands them to the events queue
 * (src/services/outbox.ts) once the batch committed. `db` is the database they are on, where they are
 * marked delivered: the one the write ended up running on.
 */
export interface Logged<T> {
  answer: T;
  events: SessionEventRow[];
  db: Database;
}

/** Activity is written at most this often per session, so reads rarely write. */
export const ACTIVITY_WRITE_INTERVAL_MS = 5 * 60 * 1000;
export const EVENTS_LISTED = 100;

/**
 * One write operation: a random id and its instant, stamped on every event it logs. Events
 * are found again by `created_at` (indexed) and then the id, so the id needs no index.
 */
interface Write {
  id: string;
  at: Date;
}

function newWrite(at: Date): Write {
  return { id: crypto.randomUUID(), at };
}

/**
 * A write may change this session row: its bucket (the id without its random part) is not
 * being moved away from this database, nor gone from it. The guard of every write.
 */
function notMoving(db: Database): SQL {
  const rowBucket = sql`substr(${sessions.id}, 1, length(${sessions.id}) - ${RANDOM_LENGTH})`;
  return notExists(db.select({ one: sql`1` }).from(bucketMoves).where(eq(bucketMoves.bucket, rowBucket)));
}

/** The bucket's move state on this database: the last statement of every per-user batch. */
function moveOf(db: Database, bucket: string) {
  return db
    .select({ state: bucketMoves.state, binding: bucketMoves.binding })
    .from(bucketMoves)
    .where(eq(bucketMoves.bucket, bucket));
}

/** A moved bucket is followed this many times at most (a move of a move, before SHARDS caught up). */
const MAX_FORWARDS = 3;

interface BucketAnswer<T> {
  answer: T;
  move: Pick<BucketMoveRow, "state" | "binding"> | undefined;
  /** A write that changed nothing: the freeze may be why. Reads: false. */
  blocked: boolean;
}

/**
 * Runs one operation (`run`: one batch ending with `moveOf`) on the place's bucket. No move:
 * the answer. `frozen` (being copied away): a read's answer stands, since the rows here stay
 * the truth until the move's last step (its activity touch was skipped); a write that did
 * something before the freeze answers that, any other was held back: BucketMoving. `moved`:
 * nothing of the bucket is here, so the same operation runs where it went: one more round
 * trip, until SHARDS names that database. A loop or a chain too long: BucketMoving.
 */
async function onBucket<T>(place: Place, run: (db: Database) => Promise<BucketAnswer<T>>): Promise<T> {
  let current = place;
  for (let forwards = 0; ; forwards++) {
    const { answer, move, blocked } = await run(current.db);
    if (!move || (move.state === "frozen" && !blocked)) return answer;
    if (move.state === "frozen") throw new BucketMoving();
    const next = forwards < MAX_FORWARDS ? current.elsewhere(move.binding) : null;
    if (!next) {
      if (forwards < MAX_FORWARDS)
        console.error(JSON.stringify({ level: "error", event: "move_target_unbound", binding: move.binding }));
      throw new BucketMoving();
    }
    current = next;
  }
}

/** The one rule for "this row is a live session". */
function isLive(at: Instant): SQL | undefined {
  return and(gt(sessions.expiresAt, at.now), at.idleCutoff ? gt(sessions.lastActiveAt, at.idleCutoff) : undefined);
}

/** The token names a live session: id, secret hash, liveness. Enough only to renew a binding. */
function isTokenOf(proof: TokenProof, at: Instant): SQL | undefined {
  return and(eq(sessions.id, proof.id), eq(sessions.secretHash, proof.secretHash), isLive(at));
}

/**
 * The one rule for "this token proves a live session": it names one, and the session is not
 * device-bound or its live bound cookie came with the token.
 */
function isProvenBy(proof: TokenProof, at: Instant): SQL | undefined {
  const bound = proof.boundHash
    ? or(
        and(eq(sessions.boundCookieHash, proof.boundHash), gt(sessions.boundCookieExpiresAt, at.now)),
        and(eq(sessions.previousBoundCookieHash, proof.boundHash), gt(sessions.previousBoundCookieExpiresAt, at.now)),
      )
    : undefined;
  return and(isTokenOf(proof, at), or(isNull(sessions.dbscKeyThumbprint), bound));
}

/** The token's user, as a subquery (no row when the token does not prove a live session). */
function ownerOf(db: Database, proof: TokenProof, at: Instant) {
  return db.select({ userId: sessions.userId }).from(sessions).where(isProvenBy(proof, at));
}

function isLiveSessionOfCaller(db: Database, proof: TokenProof, at: Instant): SQL | undefined {
  return and(inArray(sessions.userId, ownerOf(db, proof, at)), isLive(at));
}

/** When the session's user last proved who they are: the latest proof, else its creation. */
const authenticatedAt = sql<Date>`coalesce(${sessions.authenticatedAt}, ${sessions.createdAt})`.mapWith(
  sessions.createdAt,
);

/** The token's live session as the caller: who, until when, and how and when they last authenticated. */
function selectCaller(db: Database, proof: TokenProof, at: Instant) {
  return db
    .select({
      id: sessions.id,
      userId: sessions.userId,
      expiresAt: sessions.expiresAt,
      authenticatedAt,
      authProofs: sessions.authProofs,
      assuranceLevel: sessions.assuranceLevel,
    })
    .from(sessions)
    .where(isProvenBy(proof, at));
}

/** With step-up on, the caller's last authentication is too old to end another session. */
export function isStale(caller: Caller | null, at: Instant): boolean {
  return caller !== null && at.stepUpCutoff !== null && caller.authenticatedAt <= at.stepUpCutoff;
}

/**
 * With step-up on: the token's session authenticated after the cutoff. Part of the condition
 * that ends other sessions, so a stale caller ends nothing, in the same batch.
 */
function isFreshCaller(db: Database, proof: TokenProof, at: Instant): SQL | undefined {
  if (at.stepUpCutoff === null) return undefined;
  return exists(
    db
      .select({ one: sql`1` })
      .from(sessions)
      .where(
        and(
          eq(sessions.id, proof.id),
          eq(sessions.secretHash, proof.secretHash),
          gt(authenticatedAt, at.stepUpCutoff.getTime()),
        ),
      ),
  );
}

/**
 * With a sliding lifetime: now + the session's own TTL, never past creation + the maximum
 * lifetime. Sessions issued before `ttl_seconds` existed were issued for expires_at - created_at.
 */
function renewedExpiry(at: Instant, maxLifetimeMs: number): SQL<Date> {
  const ttlMs = sql`coalesce(${sessions.ttlSeconds} * 1000, ${sessions.expiresAt} - ${sessions.createdAt})`;
  return sql`min(${at.now.getTime()} + ${ttlMs}, ${sessions.createdAt} + ${maxLifetimeMs})`;
}

/**
 * Refreshes the caller's last activity when it is older than the write interval, and with
 * a sliding lifetime renews its expiry in the same UPDATE.
 */
function touch(db: Database, proof: TokenProof, at: Instant) {
  const stale = new Date(at.now.getTime() - ACTIVITY_WRITE_INTERVAL_MS);
  const sliding = at.slidingMaxLifetimeMs;
  return db
    .update(sessions)
    .set({ lastActiveAt: at.now, ...(sliding === null ? {} : { expiresAt: renewedExpiry(at, sliding) }) })
    .where(and(isProvenBy(proof, at), lte(sessions.lastActiveAt, stale), notMoving(db)));
}

/**
 * The ids of the events a statement logs at `at`: from firstEventId(at), or the last id
 * + 1 when one is already there (another event of that millisecond, or a clock ahead of this
 * one), one per row. So the table stays in time order and a write's events are found by id.
 */
function eventIds(db: Database, at: Date): SQL<number> {
  const floor = firstEventId(at);
  const last = db
    .select({ id: sql`max(${sessionEvents.id})` })
    .from(sessionEvents)
    .where(gte(sessionEvents.id, floor));
  return sql<number>`coalesce((${last}) + 1, ${floor}) + row_number() OVER () - 1`;
}

/** What an event records beyond who acted: why the system ended it, whether it was a new device. */
interface EventDetails {
  reason?: string | null;
  newDevice?: SQL<boolean>;
}

/**
 * Logs an event of `type` for every session matching `matching`. An ending runs in the same
 * batch just before the DELETE with the same condition, so the log and the change cannot
 * disagree.
 */
function recordEvents(
  db: Database,
  type: EventType,
  matching: SQL | undefined,
  actor: Actor,
  write: Write,
  details: EventDetails = {},
) {
  // Every column the insert writes, in the table's order. As SQL, since drizzle's check of an
  // INSERT … SELECT also asks for the computed `bucket`, which it then (rightly) does not insert.
  const row: { [K in Exclude<keyof SessionEventRow, "bucket">]: SelectedFields[string] } = {
    id: eventIds(db, write.at).as("id"),
    userId: sessions.userId,
    type: sql<EventType>`${type}`.as("type"),
    sessionId: sessions.id,
    actorSessionId: sql<string | null>`${actor.sessionId}`.as("actor_session_id"),
    ipAddress: sql<string | null>`${actor.ipAddress}`.as("ip_address"),
    createdAt: sql<Date>`${write.at.getTime()}`.as("created_at"),
    requestId: sql<string>`${write.id}`.as("request_id"),
    reason: sql<string | null>`${details.reason ?? null}`.as("reason"),
    deviceKey: sessions.deviceKey,
    newDevice: (details.newDevice ?? sql<boolean | null>`NULL`).as("new_device"),
    pendingDelivery: sql<boolean>`${actor.queued ? 1 : 0}`.as("pending_delivery"),
  };
  return db.insert(sessionEvents).select(
    db
      .select(row)
      .from(sessions)
      .where(and(matching, notMoving(db)))
      .getSQL(),
  );
}

function endSessions(db: Database, ending: SQL | undefined) {
  return db.delete(sessions).where(and(ending, notMoving(db)));
}

/**
 * The events `write` has logged so far, by either attempt: the last statement of each
 * writing batch, and what the queue is handed. Only this write uses its id, so a row here
 * also proves that the caller's token was live when the attempt that wrote it ran.
 */
function loggedBy(db: Database, write: Write) {
  return db
    .select()
    .from(sessionEvents)
    .where(
      and(
        gte(sessionEvents.id, firstEventId(write.at)),
        eq(sessionEvents.createdAt, write.at),
        eq(sessionEvents.requestId, write.id),
      ),
    );
}

export type Caller = {
  id: string;
  userId: string;
  expiresAt: Date;
  authenticatedAt: Date;
  authProofs: StoredProofs | null;
  assuranceLevel: number | null;
};

/**
 * A user's events, through the one index: under the user's bucket and under "", where
 * events of sessions from before buckets are (src/db/schema.ts `bucket`).
 */
function eventsOf(bucket: string, userId: string | SQLWrapper): SQL | undefined {
  return and(inArray(sessionEvents.bucket, bucket ? [bucket, ""] : [""]), eq(sessionEvents.userId, userId));
}

/** The token's live session (refreshing its activity), or null. */
export async function authenticate(place: Place, proof: TokenProof, at: Instant): Promise<Caller | null> {
  return onBucket(place, async (db) => {
    const [, callers, [move]] = await db.batch([
      touch(db, proof, at),
      selectCaller(db, proof, at),
      moveOf(db, place.bucket),
    ]);
    return { answer: callers[0] ?? null, move, blocked: false };
  });
}

export type NewSession = typeof sessions.$inferInsert & { deviceKey: string };

/** What bounds a user's sessions and what a new device is compared with. */
export interface IssuePolicy {
  maxPerUser: number;
  /** Sessions seen (created, active or ended) after this count for "a known device". */
  seenSince: Date;
}

/**
 * Whether any other session of the user seen since `since`, live or ended, had this device.
 * The new session itself is left out, so the answer is the same before and after its row exists.
 */
function seenOnDevice(db: Database, bucket: string, session: NewSession, since: Date): SQL<boolean> {
  const { userId, deviceKey, id } = session;
  return sql<boolean>`(${exists(
    db
      .select({ one: sql`1` })
      .from(sessions)
      .where(
        and(
          eq(sessions.userId, userId),
          eq(sessions.deviceKey, deviceKey),
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
          eq(sessionEvents.deviceKey, deviceKey),
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
 */
export async function insertSession(
  place: Place,
  session: NewSession,
  actor: Actor,
  policy: IssuePolicy,
  at: Instant,
): Promise<Logged<{ stored: boolean; newDevice: boolean }>> {
  const write = newWrite(session.createdAt);
  const ours = and(eq(sessions.id, session.id), eq(sessions.secretHash, session.secretHash));
  const evictor = { ...actor, sessionId: session.id };
  return onBucket(place, async (db) => {
    // Keep the maxPerUser - 1 most recently active others; the new one makes maxPerUser.
    const overCap = inArray(
      sessions.id,
      db
        .select({ id: sessions.id })
        .from(sessions)
        .where(and(eq(sessions.userId, session.userId), isLive(at), ne(sessions.id, session.id)))
        .orderBy(desc(sessions.lastActiveAt), desc(sessions.createdAt), desc(sessions.id))
        // SQLite has no OFFSET without a LIMIT; this one never cuts anything.
        .limit(Number.MAX_SAFE_INTEGER)
        .offset(policy.maxPerUser - 1),
    );
    const [, , stored, , , events, [move]] = await db.batch([
      insertUnlessDone(db, place.bucket, session, write),
      recordEvents(db, "created", and(ours, notExists(loggedBy(db, write))), actor, write, {
        newDevice: sql<boolean>`${not(seenOnDevice(db, place.bucket, session, policy.seenSince))}`,
      }),
      db.select({ id: sessions.id }).from(sessions).where(ours),
      recordEvents(db, "evicted", overCap, evictor, write),
      endSessions(db, overCap),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    const created = events.find((event) => event.type === "created");
    const answer = { stored: stored.length > 0 || created !== undefined, newDevice: created?.newDevice === true };
    return { answer: { answer, events, db }, move, blocked: !answer.stored };
  });
}

/**
 * INSERT … SELECT of the new session's row, guarded twice: by the bucket's move state, and
 * by `write` having logged nothing yet (else the first attempt of this batch committed, and
 * the session may since have been ended by another request: a replay must not bring it
 * back). `ON CONFLICT (id) DO NOTHING`: nothing either on an id that exists (a collision).
 */
function insertUnlessDone(db: Database, bucket: string, session: NewSession, write: Write) {
  const values = Object.entries(getTableColumns(sessions)).map(
    ([key, column]) => sql`${sql.param(session[key as keyof NewSession] ?? null, column)}`,
  );
  const guard = and(
    notExists(db.select({ one: sql`1` }).from(bucketMoves).where(eq(bucketMoves.bucket, bucket))),
    notExists(loggedBy(db, write)),
  );
  return db
    .insert(sessions)
    .select(sql`SELECT ${sql.join(values, sql`, `)} WHERE ${guard}`)
    .onConflictDoNothing({ target: sessions.id });
}

/** What a list reads of a session: the columns of `ListedSession`, and its user. */
const listed = {
  id: sessions.id,
  userId: sessions.userId,
  ipAddress: sessions.ipAddress,
  userAgent: sessions.userAgent,
  browser: sessions.browser,
  os: sessions.os,
  deviceType: sessions.deviceType,
  country: sessions.country,
  city: sessions.city,
  createdAt: sessions.createdAt,
  expiresAt: sessions.expiresAt,
  lastActiveAt: sessions.lastActiveAt,
  dbscKeyThumbprint: sessions.dbscKeyThumbprint,
};
const newestFirst = [desc(sessions.createdAt), desc(sessions.id)];

/** The caller's user's live sessions, newest first; empty exactly when the token is not live. */
export async function listSessionsByToken(place: Place, proof: TokenProof, at: Instant): Promise<ListedSession[]> {
  return onBucket(place, async (db) => {
    const [, rows, [move]] = await db.batch([
      touch(db, proof, at),
      db
        .select(listed)
        .from(sessions)
        .where(isLiveSessionOfCaller(db, proof, at))
        .orderBy(...newestFirst),
      moveOf(db, place.bucket),
    ]);
    return { answer: rows, move, blocked: false };
  });
}

/** A user's live sessions in the list's order, for the rest of the system (no token, no touch). */
export async function listSessionsByUserId(place: Place, userId: string, at: Instant): Promise<ListedSession[]> {
  return onBucket(place, async (db) => {
    const [rows, [move]] = await db.batch([
      db
        .select(listed)
        .from(sessions)
        .where(and(eq(sessions.userId, userId), isLive(at)))
        .orderBy(...newestFirst),
      moveOf(db, place.bucket),
    ]);
    return { answer: rows, move, blocked: false };
  });
}

/**
 * Ends every live session matching `ending` (built on the database the batch runs on), each
 * logged as `type` with `details`, in one batch; answers how many ended, from the events this
 * write logged by either attempt of the batch: one per ended session.
 */
function endMatching(
  place: Place,
  type: EventType,
  ending: (db: Database) => SQL | undefined,
  actor: Actor,
  at: Instant,
  details: EventDetails = {},
): Promise<Logged<number>> {
  const write = newWrite(at.now);
  return onBucket(place, async (db) => {
    const matching = ending(db);
    const [, , ended, [move]] = await db.batch([
      recordEvents(db, type, matching, actor, write, details),
      endSessions(db, matching),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    return { answer: { answer: ended.length, events: ended, db }, move, blocked: ended.length === 0 };
  });
}

/** The same write, answering whether it ended anything. */
function endedAny({ answer, ...logged }: Logged<number>): Logged<boolean> {
  return { answer: answer > 0, ...logged };
}

/** Ends every live session of `userId` but `exceptSessionId`, logging `ended` with the reason. */
export async function endSessionsByUserId(
  place: Place,
  userId: string,
  exceptSessionId: string | null,
  reason: string,
  actor: Actor,
  at: Instant,
): Promise<Logged<number>> {
  const ending = and(
    eq(sessions.userId, userId),
    isLive(at),
    exceptSessionId === null ? undefined : ne(sessions.id, exceptSessionId),
  );
  return endMatching(place, "ended", () => ending, actor, at, { reason });
}

/** Ends one live session by id (no token), logging `ended` with the reason. */
export async function endSessionById(
  place: Place,
  sessionId: string,
  reason: string,
  actor: Actor,
  at: Instant,
): Promise<Logged<boolean>> {
  const ending = and(eq(sessions.id, sessionId), isLive(at));
  return endedAny(await endMatching(place, "ended", () => ending, actor, at, { reason }));
}

/**
 * Deletes `targetId` if it is a live session of the caller's user. `proven`: the token was
 * live when the request ran (its session may be the one deleted).
 */
export async function deleteSession(
  place: Place,
  proof: TokenProof,
  targetId: string,
  actor: Actor,
  at: Instant,
): Promise<Logged<{ proven: boolean; deleted: boolean; caller: Caller | null }>> {
  const write = newWrite(at.now);
  return onBucket(place, async (db) => {
    // The caller's own session is never held back by step-up: a user can always leave.
    const fresh = targetId === proof.id ? undefined : isFreshCaller(db, proof, at);
    const target = and(eq(sessions.id, targetId), isLiveSessionOfCaller(db, proof, at), fresh);
    const [, callers, , , ended, [move]] = await db.batch([
      touch(db, proof, at),
      selectCaller(db, proof, at),
      recordEvents(db, "deleted", target, actor, write),
      endSessions(db, target),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    const answer = {
      proven: callers.length > 0 || ended.length > 0,
      deleted: ended.length > 0,
      caller: callers[0] ?? null,
    };
    return { answer: { answer, events: ended, db }, move, blocked: ended.length === 0 };
  });
}

/** Ends the token's own session; false when it was not live. */
export async function endSessionByToken(
  place: Place,
  proof: TokenProof,
  actor: Actor,
  at: Instant,
): Promise<Logged<boolean>> {
  return endedAny(await endMatching(place, "logout", () => isProvenBy(proof, at), actor, at));
}

/** Ends every live session of the token's user; 0 when the token was not live. */
export async function endAllSessionsByToken(
  place: Place,
  proof: TokenProof,
  actor: Actor,
  at: Instant,
): Promise<Logged<number>> {
  return endMatching(place, "logout_all", (db) => isLiveSessionOfCaller(db, proof, at), actor, at);
}

/** Ends every live session of the token's user but the token's own; `proven` as for deleteSession. */
export async function endOtherSessionsByToken(
  place: Place,
  proof: TokenProof,
  actor: Actor,
  at: Instant,
): Promise<Logged<{ proven: boolean; ended: number; caller: Caller | null }>> {
  const write = newWrite(at.now);
  return onBucket(place, async (db) => {
    const others = and(isLiveSessionOfCaller(db, proof, at), ne(sessions.id, proof.id), isFreshCaller(db, proof, at));
    const [, callers, , , ended, [move]] = await db.batch([
      touch(db, proof, at),
      selectCaller(db, proof, at),
      recordEvents(db, "logout_others", others, actor, write),
      endSessions(db, others),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    const answer = { proven: callers.length > 0 || ended.length > 0, ended: ended.length, caller: callers[0] ?? null };
    return { answer: { answer, events: ended, db }, move, blocked: ended.length === 0 };
  });
}

/** What a re-authentication records: the new secret's hash, the proofs, the assurance level. */
export interface Reauthentication {
  secretHash: string;
  proofs: StoredProofs;
  assuranceLevel: number | null;
}

/**
 * Gives the token's live session a new secret and records the new proofs (merged over the
 * old, factor by factor), in one batch: the `reauthenticated` event is logged while the old
 * secret still proves the session, then the row changes. The answer is this write's event:
 * a replayed batch finds the old secret gone and changes nothing, yet answers the same, so the
 * caller gets the new token it was about to be given, never a third one. Null when the token
 * did not prove a live session: nothing changed.
 */
export async function reauthenticateSession(
  place: Place,
  proof: TokenProof,
  change: Reauthentication,
  actor: Actor,
  at: Instant,
): Promise<Logged<{ expiresAt: Date } | null>> {
  const write = newWrite(at.now);
  const latest = Math.max(...Object.values(change.proofs));
  return onBucket(place, async (db) => {
    const proven = isProvenBy(proof, at);
    const [, , [row], events, [move]] = await db.batch([
      recordEvents(db, "reauthenticated", proven, actor, write),
      db
        .update(sessions)
        .set({
          secretHash: change.secretHash,
          authProofs: sql`json_patch(coalesce(${sessions.authProofs}, '{}'), ${JSON.stringify(change.proofs)})`,
          assuranceLevel: change.assuranceLevel ?? sessions.assuranceLevel,
          authenticatedAt: sql`max(coalesce(${sessions.authenticatedAt}, 0), ${latest})`,
          lastActiveAt: at.now,
        })
        .where(and(proven, notMoving(db))),
      db
        .select({ expiresAt: sessions.expiresAt })
        .from(sessions)
        .where(and(eq(sessions.id, proof.id), eq(sessions.secretHash, change.secretHash))),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    const answer = events.length > 0 && row ? row : null;
    return { answer: { answer, events, db }, move, blocked: events.length === 0 };
  });
}

/** The caller's user's security log, newest first; caller null when the token is not live. */
export async function listEvents(place: Place, proof: TokenProof, at: Instant) {
  return onBucket(place, async (db) => {
    const [, callers, events, [move]] = await db.batch([
      touch(db, proof, at),
      selectCaller(db, proof, at),
      db
        .select()
        .from(sessionEvents)
        .where(eventsOf(place.bucket, ownerOf(db, proof, at)))
        .orderBy(desc(sessionEvents.createdAt), desc(sessionEvents.id))
        .limit(EVENTS_LISTED),
      moveOf(db, place.bucket),
    ]);
    return { answer: { caller: callers[0] ?? null, events }, move, blocked: false };
  });
}

/**
 * Deletes up to `limit` expired sessions; returns how many went. Idle ones are refused and
 * unlisted already (`isLive`), and go when they expire: no index on last_active_at to find them.
 */
export async function purgeSessions(db: Database, at: Instant, limit: number): Promise<number> {
  const batch = db.select({ id: sessions.id }).from(sessions).where(lte(sessions.expiresAt, at.now)).limit(limit);
  const result = await db.delete(sessions).where(inArray(sessions.id, batch)).run();
  return result.meta.changes;
}

/**
 * Deletes up to `limit` security events from `before` or earlier, oldest id first; returns how
 * many went. By id: every such event has an id below firstEventId(before + 1 ms) but one
 * a clock ahead or a move numbered later, which goes in a later run.
 */
export async function purgeEvents(db: Database, before: Date, limit: number): Promise<number> {
  const old = db
    .select({ id: sessionEvents.id })
    .from(sessionEvents)
    .where(and(lt(sessionEvents.id, firstEventId(before.getTime() + 1)), lte(sessionEvents.createdAt, before)))
    .orderBy(sessionEvents.id)
    .limit(limit);
  const result = await db.delete(sessionEvents).where(inArray(sessionEvents.id, old)).run();
  return result.meta.changes;
}

/** The oldest events the queue has not accepted, written before `before`. */
export async function pendingEvents(db: Database, before: Date, limit: number): Promise<SessionEventRow[]> {
  return (
    db
      .select()
      .from(sessionEvents)
      // A literal 1, so SQLite can use the partial index session_events_pending_idx.
      .where(and(sql`${sessionEvents.pendingDelivery} = 1`, lte(sessionEvents.createdAt, before)))
      .orderBy(sessionEvents.id)
      .limit(limit)
  );
}

// D1 binds at most 100 values per statement.
const MARK_CHUNK = 90;

/** Marks events the queue accepted; one batch however many (each statement under D1's 100 bound values). */
export async function markDelivered(db: Database, ids: number[]): Promise<void> {
  const statements = [];
  for (let i = 0; i < ids.length; i += MARK_CHUNK) {
    statements.push(
      db
        .update(sessionEvents)
        .set({ pendingDelivery: sql`0` })
        .where(inArray(sessionEvents.id, ids.slice(i, i + MARK_CHUNK))),
    );
  }
  const [first, ...rest] = statements;
  if (first) await db.batch([first, ...rest]);
}

/** What a verified registration proof lets the batch write: the key, and the challenge replacing the one it signed. */
export interface Binding {
  /** The challenge the proof signed (its `jti`). */
  challenge: string;
  thumbprint: string;
  /** The challenge the next proof must sign. */
  nextChallenge: string;
}

/** What a refresh writes: a new bound cookie too, if its proof (`challenge`, null: none valid) holds. */
export interface Renewal extends Omit<Binding, "challenge"> {
  challenge: string | null;
  boundHash: string;
  boundExpiresAt: Date;
}

export type RegistrationOutcome = "bound" | "already_bound" | "wrong_challenge" | "not_live";

/**
 * Binds the token's live session to the key of a verified proof over the challenge it was
 * issued, in one batch. The bound cookie the login set stays valid: requests sent while the
 * browser registered carry it. The `device_bound` event is logged while
 * the session is still unbound, then the row changes (so a replay logs nothing twice and still
 * answers "bound", from the event). The challenge is consumed: it never binds twice.
 */
export async function registerBinding(
  place: Place,
  proof: TokenProof,
  binding: Binding,
  actor: Actor,
  at: Instant,
): Promise<Logged<RegistrationOutcome>> {
  const write = newWrite(at.now);
  return onBucket(place, async (db) => {
    const eligible = and(
      isTokenOf(proof, at),
      isNull(sessions.dbscKeyThumbprint),
      eq(sessions.dbscChallenge, binding.challenge),
    );
    const [, , [row], events, [move]] = await db.batch([
      recordEvents(db, "device_bound", eligible, actor, write),
      db
        .update(sessions)
        .set({ dbscKeyThumbprint: binding.thumbprint, dbscChallenge: binding.nextChallenge })
        .where(and(eligible, notMoving(db))),
      db.select({ thumbprint: sessions.dbscKeyThumbprint }).from(sessions).where(isTokenOf(proof, at)),
      loggedBy(db, write),
      moveOf(db, place.bucket),
    ]);
    const answer: RegistrationOutcome =
      events.length > 0 ? "bound" : !row ? "not_live" : row.thumbprint ? "already_bound" : "wrong_challenge";
    return { answer: { answer, events, db }, move, blocked: answer === "wrong_challenge" };
  });
}

export type RefreshOutcome = "refreshed" | "challenged" | "not_bound" | "not_live";

/**
 * Renews a device-bound session's bound cookie when the proof signed the session's current
 * challenge with its key; otherwise only replaces the challenge (for the 403 that asks for
 * a proof). Either way the challenge changes, so none is accepted twice. One batch; it is not
 * activity, so `last_active_at` and the expiry stay as they are.
 */
export async function refreshBinding(
  place: Place,
  proof: TokenProof,
  binding: Renewal,
  at: Instant,
): Promise<RefreshOutcome> {
  return onBucket(place, async (db) => {
    const bound = and(isTokenOf(proof, at), eq(sessions.dbscKeyThumbprint, binding.thumbprint));
    const renew = db
      .update(sessions)
      .set({
        dbscChallenge: binding.nextChallenge,
        boundCookieHash: binding.boundHash,
        boundCookieExpiresAt: binding.boundExpiresAt,
        // SET reads the row as it was: the replaced cookie stays good until its own expiry.
        previousBoundCookieHash: sql`${sessions.boundCookieHash}`,
        previousBoundCookieExpiresAt: sql`${sessions.boundCookieExpiresAt}`,
      })
      .where(and(bound, eq(sessions.dbscChallenge, binding.challenge ?? ""), notMoving(db)));
    // Skipped when the renewal above already set it: one row written per refresh.
    const rechallenge = db
      .update(sessions)
      .set({ dbscChallenge: binding.nextChallenge })
      .where(
        and(
          bound,
          or(isNull(sessions.dbscChallenge), ne(sessions.dbscChallenge, binding.nextChallenge)),
          notMoving(db),
        ),
      );
    const [, , [row], [move]] = await db.batch([
      renew,
      rechallenge,
      db
        .select({ thumbprint: sessions.dbscKeyThumbprint, boundHash: sessions.boundCookieHash })
        .from(sessions)
        .where(isTokenOf(proof, at)),
      moveOf(db, place.bucket),
    ]);
    const answer: RefreshOutcome = !row
      ? "not_live"
      : row.thumbprint !== binding.thumbprint
        ? "not_bound"
        : row.boundHash === binding.boundHash
          ? "refreshed"
          : "challenged";
    return { answer, move, blocked: answer === "challenged" };
  });
}
