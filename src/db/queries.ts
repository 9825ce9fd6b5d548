import { and, desc, eq, exists, gt, inArray, lte, ne, not, or, type SQL, sql } from "drizzle-orm";
import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import type { Instant } from "../clock.ts";
import type { Outbox } from "../outbox.ts";
import { retryTransientD1 } from "./binding.ts";
import { type EventType, type SessionEventRow, type SessionRow, sessionEvents, sessions } from "./schema.ts";

// Every statement the service runs. Each exported operation is exactly one D1 round trip:
// authentication travels inside the statement (as a subquery) or in the same batch, and
// a batch runs as one transaction, so its statements see one consistent table.

export type Database = DrizzleD1Database;

/** Every path (HTTP, RPC, cron) reads through here, so each retries transient errors once. */
export function openDatabase(d1: D1Database): Database {
  return drizzle(retryTransientD1(d1));
}

/** A well-formed token, reduced to what is compared with the table. */
export interface TokenProof {
  id: string;
  secretHash: string;
}

/** Who is acting, for the security log, and where the events it causes go besides it. */
export interface Actor {
  sessionId: string | null;
  ipAddress: string | null;
  /** The events queue's outbox, when the queue is configured. */
  outbox: Outbox | null;
}

/** After the batch that wrote `events` committed: hand them to the outbox, if any. */
function published<T>(actor: Actor, events: SessionEventRow[], result: T): T {
  if (events.length > 0) actor.outbox?.publish(events);
  return result;
}

/** Activity is written at most this often per session, so reads rarely write. */
export const ACTIVITY_WRITE_INTERVAL_MS = 5 * 60 * 1000;
export const EVENTS_LISTED = 100;

/** The one rule for "this row is a live session". */
function isLive(at: Instant): SQL | undefined {
  return and(gt(sessions.expiresAt, at.now), at.idleCutoff ? gt(sessions.lastActiveAt, at.idleCutoff) : undefined);
}

/** The one rule for "this token proves a live session": id, secret hash, liveness. */
function isProvenBy(proof: TokenProof, at: Instant): SQL | undefined {
  return and(eq(sessions.id, proof.id), eq(sessions.secretHash, proof.secretHash), isLive(at));
}

/** The token's user, as a subquery (no row when the token does not prove a live session). */
function ownerOf(db: Database, proof: TokenProof, at: Instant) {
  return db.select({ userId: sessions.userId }).from(sessions).where(isProvenBy(proof, at));
}

function isLiveSessionOfCaller(db: Database, proof: TokenProof, at: Instant): SQL | undefined {
  return and(inArray(sessions.userId, ownerOf(db, proof, at)), isLive(at));
}

function selectCaller(db: Database, proof: TokenProof, at: Instant) {
  return db
    .select({ id: sessions.id, userId: sessions.userId, expiresAt: sessions.expiresAt })
    .from(sessions)
    .where(isProvenBy(proof, at));
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
    .where(and(isProvenBy(proof, at), lte(sessions.lastActiveAt, stale)));
}

/**
 * Logs the end of every session matching `ending`. Runs in the same batch just before
 * the DELETE with the same condition, so the log and the change cannot disagree.
 */
function recordEndings(
  db: Database,
  type: EventType,
  ending: SQL | undefined,
  actor: Actor,
  at: Instant,
  reason: string | null = null,
) {
  return db
    .insert(sessionEvents)
    .select(
      db
        .select({
          id: sql<number>`NULL`.as("id"),
          userId: sessions.userId,
          type: sql<EventType>`${type}`.as("type"),
          sessionId: sessions.id,
          actorSessionId: sql<string | null>`${actor.sessionId}`.as("actor_session_id"),
          ipAddress: sql<string | null>`${actor.ipAddress}`.as("ip_address"),
          createdAt: sql<Date>`${at.now.getTime()}`.as("created_at"),
          reason: sql<string | null>`${reason}`.as("reason"),
          deviceKey: sessions.deviceKey,
          newDevice: sql<boolean | null>`NULL`.as("new_device"),
          pendingDelivery: sql<boolean>`${actor.outbox ? 1 : 0}`.as("pending_delivery"),
        })
        .from(sessions)
        .where(ending),
    )
    .returning();
}

function endSessions(db: Database, ending: SQL | undefined) {
  return db.delete(sessions).where(ending).returning({ id: sessions.id });
}

export type Caller = { id: string; userId: string; expiresAt: Date };

/** The token's live session (refreshing its activity), or null. */
export async function authenticate(db: Database, proof: TokenProof, at: Instant): Promise<Caller | null> {
  const [, callers] = await db.batch([touch(db, proof, at), selectCaller(db, proof, at)]);
  return callers[0] ?? null;
}

export type NewSession = typeof sessions.$inferInsert & { deviceKey: string };

/** What bounds a user's sessions and what a new device is compared with. */
export interface IssuePolicy {
  maxPerUser: number;
  /** Sessions seen (created, active or ended) after this count for "a known device". */
  seenSince: Date;
}

/** Whether any session of the user seen since `since`, live or ended, had this device. */
function seenOnDevice(db: Database, userId: string, key: string, since: Date): SQL {
  return sql`(${exists(
    db
      .select({ one: sql`1` })
      .from(sessions)
      .where(and(eq(sessions.userId, userId), eq(sessions.deviceKey, key), gt(sessions.lastActiveAt, since))),
  )} OR ${exists(
    db
      .select({ one: sql`1` })
      .from(sessionEvents)
      .where(
        and(eq(sessionEvents.userId, userId), eq(sessionEvents.deviceKey, key), gt(sessionEvents.createdAt, since)),
      ),
  )})`;
}

/**
 * Inserts a session and its `created` event; beyond the cap, ends the user's least recently
 * active live sessions (`evicted`). One batch: the new-device check runs first, so it sees
 * only the sessions that existed before.
 */
export async function insertSession(
  db: Database,
  session: NewSession,
  actor: Actor,
  policy: IssuePolicy,
  at: Instant,
): Promise<{ newDevice: boolean }> {
  // Keep the maxPerUser - 1 most recently active; the new one makes maxPerUser.
  const overCap = inArray(
    sessions.id,
    db
      .select({ id: sessions.id })
      .from(sessions)
      .where(and(eq(sessions.userId, session.userId), isLive(at)))
      .orderBy(desc(sessions.lastActiveAt), desc(sessions.createdAt), desc(sessions.id))
      // SQLite has no OFFSET without a LIMIT; this one never cuts anything.
      .limit(Number.MAX_SAFE_INTEGER)
      .offset(policy.maxPerUser - 1),
  );
  const evictor = { ...actor, sessionId: session.id };
  const [created, evicted] = await db.batch([
    db
      .insert(sessionEvents)
      .values({
        userId: session.userId,
        type: "created",
        sessionId: session.id,
        actorSessionId: actor.sessionId,
        ipAddress: actor.ipAddress,
        createdAt: session.createdAt,
        deviceKey: session.deviceKey,
        newDevice: not(seenOnDevice(db, session.userId, session.deviceKey, policy.seenSince)),
        pendingDelivery: actor.outbox !== null,
      })
      .returning(),
    recordEndings(db, "evicted", overCap, evictor, at),
    endSessions(db, overCap),
    db.insert(sessions).values(session),
  ]);
  return published(actor, [...created, ...evicted], { newDevice: created[0]?.newDevice === true });
}

/** What the list shows of a session: every column but the secret's hash. */
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
};
const newestFirst = [desc(sessions.createdAt), desc(sessions.id)];
export type ListedSession = { [K in keyof typeof listed]: SessionRow[K] };

/** The caller's user's live sessions, newest first; empty exactly when the token is not live. */
export async function listSessions(db: Database, proof: TokenProof, at: Instant): Promise<ListedSession[]> {
  const [, rows] = await db.batch([
    touch(db, proof, at),
    db
      .select(listed)
      .from(sessions)
      .where(isLiveSessionOfCaller(db, proof, at))
      .orderBy(...newestFirst),
  ]);
  return rows;
}

/** A user's live sessions in the list's order, for the rest of the system (no token, no touch). */
export async function listUserSessions(db: Database, userId: string, at: Instant): Promise<ListedSession[]> {
  return db
    .select(listed)
    .from(sessions)
    .where(and(eq(sessions.userId, userId), isLive(at)))
    .orderBy(...newestFirst);
}

/** Ends every live session of `userId` but `exceptSessionId`, logging `ended` with the reason. */
export async function endUserSessions(
  db: Database,
  userId: string,
  exceptSessionId: string | null,
  reason: string,
  actor: Actor,
  at: Instant,
): Promise<number> {
  const ending = and(
    eq(sessions.userId, userId),
    isLive(at),
    exceptSessionId === null ? undefined : ne(sessions.id, exceptSessionId),
  );
  const [events, ended] = await db.batch([
    recordEndings(db, "ended", ending, actor, at, reason),
    endSessions(db, ending),
  ]);
  return published(actor, events, ended.length);
}

/** Ends one live session by id (no token), logging `ended` with the reason. */
export async function endSessionById(
  db: Database,
  sessionId: string,
  reason: string,
  actor: Actor,
  at: Instant,
): Promise<boolean> {
  const ending = and(eq(sessions.id, sessionId), isLive(at));
  const [events, ended] = await db.batch([
    recordEndings(db, "ended", ending, actor, at, reason),
    endSessions(db, ending),
  ]);
  return published(actor, events, ended.length > 0);
}

/** Deletes `targetId` if it is a live session of the caller's user. */
export async function deleteSession(
  db: Database,
  proof: TokenProof,
  targetId: string,
  actor: Actor,
  at: Instant,
): Promise<{ caller: Caller | null; deleted: boolean }> {
  const target = and(eq(sessions.id, targetId), isLiveSessionOfCaller(db, proof, at));
  const [, callers, events, deleted] = await db.batch([
    touch(db, proof, at),
    selectCaller(db, proof, at),
    recordEndings(db, "deleted", target, actor, at),
    endSessions(db, target),
  ]);
  return published(actor, events, { caller: callers[0] ?? null, deleted: deleted.length > 0 });
}

/** Ends the token's own session; false when it was not live. */
export async function endSession(db: Database, proof: TokenProof, actor: Actor, at: Instant): Promise<boolean> {
  const own = isProvenBy(proof, at);
  const [events, ended] = await db.batch([recordEndings(db, "logout", own, actor, at), endSessions(db, own)]);
  return published(actor, events, ended.length > 0);
}

/** Ends every live session of the token's user; 0 when the token was not live. */
export async function endAllSessions(db: Database, proof: TokenProof, actor: Actor, at: Instant): Promise<number> {
  const all = isLiveSessionOfCaller(db, proof, at);
  const [events, ended] = await db.batch([recordEndings(db, "logout_all", all, actor, at), endSessions(db, all)]);
  return published(actor, events, ended.length);
}

/** Ends every live session of the token's user but the token's own. */
export async function endOtherSessions(
  db: Database,
  proof: TokenProof,
  actor: Actor,
  at: Instant,
): Promise<{ caller: Caller | null; ended: number }> {
  const others = and(isLiveSessionOfCaller(db, proof, at), ne(sessions.id, proof.id));
  const [, callers, events, ended] = await db.batch([
    touch(db, proof, at),
    selectCaller(db, proof, at),
    recordEndings(db, "logout_others", others, actor, at),
    endSessions(db, others),
  ]);
  return published(actor, events, { caller: callers[0] ?? null, ended: ended.length });
}

/** The caller's user's security log, newest first; caller null when the token is not live. */
export async function listEvents(db: Database, proof: TokenProof, at: Instant) {
  const [, callers, events] = await db.batch([
    touch(db, proof, at),
    selectCaller(db, proof, at),
    db
      .select()
      .from(sessionEvents)
      // `=`, not IN: SQLite then walks the (user_id, created_at) index backwards and stops at the limit.
      .where(eq(sessionEvents.userId, ownerOf(db, proof, at)))
      .orderBy(desc(sessionEvents.createdAt), desc(sessionEvents.id))
      .limit(EVENTS_LISTED),
  ]);
  return { caller: callers[0] ?? null, events };
}

/** Deletes up to `limit` expired or idle sessions, oldest first; returns how many went. */
export async function purgeSessions(db: Database, at: Instant, limit: number): Promise<number> {
  const dead = or(
    lte(sessions.expiresAt, at.now),
    at.idleCutoff ? lte(sessions.lastActiveAt, at.idleCutoff) : undefined,
  );
  const batch = db.select({ id: sessions.id }).from(sessions).where(dead).limit(limit);
  const result = await db.delete(sessions).where(inArray(sessions.id, batch)).run();
  return result.meta.changes;
}

/** Deletes up to `limit` security events older than `before`; returns how many went. */
export async function purgeEvents(db: Database, before: Date, limit: number): Promise<number> {
  const old = db
    .select({ id: sessionEvents.id })
    .from(sessionEvents)
    .where(lte(sessionEvents.createdAt, before))
    .orderBy(sessionEvents.createdAt)
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
