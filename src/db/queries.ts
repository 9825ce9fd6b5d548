import { and, desc, eq, gt, inArray, lte } from "drizzle-orm";
import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import { sessions } from "./schema.ts";

// Every statement the service runs. Each exported operation is exactly one D1 round trip:
// authentication travels inside the statement (as a subquery) or in the same batch.

export type Database = DrizzleD1Database;

export function openDatabase(d1: D1Database): Database {
  return drizzle(d1);
}

/** A well-formed token, reduced to what is compared with the table. */
export interface TokenProof {
  id: string;
  secretHash: string;
}

/** The one rule for "this token is a live session": id, secret hash, not yet expired. */
function isLiveSession(proof: TokenProof, now: Date) {
  return and(eq(sessions.id, proof.id), eq(sessions.secretHash, proof.secretHash), gt(sessions.expiresAt, now));
}

function ownerOf(db: Database, proof: TokenProof, now: Date) {
  return db.select({ userId: sessions.userId }).from(sessions).where(isLiveSession(proof, now));
}

function selectCaller(db: Database, proof: TokenProof, now: Date) {
  return db
    .select({ id: sessions.id, userId: sessions.userId, expiresAt: sessions.expiresAt })
    .from(sessions)
    .where(isLiveSession(proof, now));
}

export type Caller = { id: string; userId: string; expiresAt: Date };

export async function authenticate(db: Database, proof: TokenProof, now: Date): Promise<Caller | null> {
  return (await selectCaller(db, proof, now).get()) ?? null;
}

export type NewSession = typeof sessions.$inferInsert;

export async function insertSession(db: Database, session: NewSession): Promise<void> {
  await db.insert(sessions).values(session);
}

/** The caller's user's live sessions, newest first; empty exactly when the token is not live. */
export function listSessions(db: Database, proof: TokenProof, now: Date) {
  return db
    .select()
    .from(sessions)
    .where(and(inArray(sessions.userId, ownerOf(db, proof, now)), gt(sessions.expiresAt, now)))
    .orderBy(desc(sessions.createdAt), desc(sessions.id));
}

/**
 * Deletes `targetId` if it is a live session of the caller's user. One batch: the caller's
 * row (null: not authenticated) and whether the target was deleted.
 */
export async function deleteSession(
  db: Database,
  proof: TokenProof,
  targetId: string,
  now: Date,
): Promise<{ caller: Caller | null; deleted: boolean }> {
  const [callers, deleted] = await db.batch([
    selectCaller(db, proof, now),
    db
      .delete(sessions)
      .where(
        and(
          eq(sessions.id, targetId),
          gt(sessions.expiresAt, now),
          inArray(sessions.userId, ownerOf(db, proof, now)),
        ),
      )
      .returning({ id: sessions.id }),
  ]);
  return { caller: callers[0] ?? null, deleted: deleted.length > 0 };
}

/** Ends the token's own session; false when it was not live. */
export async function endSession(db: Database, proof: TokenProof, now: Date): Promise<boolean> {
  const ended = await db.delete(sessions).where(isLiveSession(proof, now)).returning({ id: sessions.id });
  return ended.length > 0;
}

/** Ends every session of the token's user; 0 when the token was not live. */
export async function endAllSessions(db: Database, proof: TokenProof, now: Date): Promise<number> {
  const ended = await db
    .delete(sessions)
    .where(inArray(sessions.userId, ownerOf(db, proof, now)))
    .returning({ id: sessions.id });
  return ended.length;
}

/** Deletes up to `limit` expired rows, oldest first; returns how many went. */
export async function purgeExpired(db: Database, now: Date, limit: number): Promise<number> {
  const expired = db
    .select({ id: sessions.id })
    .from(sessions)
    .where(lte(sessions.expiresAt, now))
    .orderBy(sessions.expiresAt)
    .limit(limit);
  const result = await db.delete(sessions).where(inArray(sessions.id, expired)).run();
  return result.meta.changes;
}
