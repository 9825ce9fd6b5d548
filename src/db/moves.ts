import { and, eq, getTableColumns, gt, gte, inArray, lt, sql } from "drizzle-orm";
import { RANDOM_LENGTH } from "../domain/token.ts";
import { batchAll, batchNamed, chunks, type Database } from "./client.ts";
import { insertMissingPolicyRows } from "./organizations/policies.ts";
import {
  type BucketMoveRow,
  bucketMoves,
  organizationPolicies,
  sessionEvents,
  sessions,
  ssfReceivedSets,
  upstreamLinks,
} from "./schema.ts";

// The statements of moving a bucket of users from one D1 database to another: each exported
// function is one round trip (a statement, or a batch) on one database, and each is safe to
// run again. The order they run in, resumption and retries: src/services/moves.ts; why it is
// safe: ARCHITECTURE.md, "Moving a bucket".
//
//   freeze  source: bucket_moves row (bucket, frozen, target). From this commit on, no
//           request writes the bucket there (src/db/buckets.ts guards every write); reads
//           still answer from it. The same batch reads the bucket's rows as it leaves them.
//   copy    target: row (bucket, moved, source), so that a request reaching the target
//           early is sent back to the source, and nothing there can change the bucket's
//           rows; what an interrupted copy left there is cleared, and the bucket's sessions,
//           events and inbound SETs read from the (frozen, so unchanging) source are written.
//           Events get new row ids; every other field is kept. The policy rows of the
//           bucket's members' organizations go with them where the target has none (a
//           database added after the organization was created), or their sessions would not be
//           live there (src/db/liveness.ts).
//   switch  source: the row becomes (moved, target) and the bucket's sessions, events and
//           inbound SETs are deleted. Requests now follow the row to the target.
//   open    target: its row goes; the target answers for the bucket.

export type { BucketMoveRow };
export type MoveSessionRow = typeof sessions.$inferSelect;
export type MoveEventRow = typeof sessionEvents.$inferSelect;

/** Rows read from the source per round trip: a page this full may have more after it. */
export const MOVE_PAGE = 500;
// D1 binds at most 100 values per statement: one per column of each row (events without their
// id and their computed bucket).
const SESSION_ROWS_PER_INSERT = Math.floor(100 / Object.keys(getTableColumns(sessions)).length);
const EVENT_ROWS_PER_INSERT = Math.floor(100 / (Object.keys(getTableColumns(sessionEvents)).length - 2));
const INBOUND_ROWS_PER_INSERT = Math.floor(100 / Object.keys(getTableColumns(ssfReceivedSets)).length);
const LINK_ROWS_PER_INSERT = Math.floor(100 / Object.keys(getTableColumns(upstreamLinks)).length);

/** The bucket's sessions by id: ids start with the key, and `~` sorts after every base64url character. */
function inBucket(key: string) {
  return and(
    gte(sessions.id, key),
    lt(sessions.id, `${key}~`),
    sql`length(${sessions.id}) = ${key.length + RANDOM_LENGTH}`,
  );
}

/** The bucket's move row on `db`, if any. */
export async function readMoveRow(db: Database, key: string): Promise<BucketMoveRow | undefined> {
  const [row] = await db.select().from(bucketMoves).where(eq(bucketMoves.bucket, key));
  return row;
}

const sessionsAfterQuery = (db: Database, key: string, after: string) =>
  db
    .select()
    .from(sessions)
    .where(and(inBucket(key), gt(sessions.id, after)))
    .orderBy(sessions.id)
    .limit(MOVE_PAGE);

const eventsAfterQuery = (db: Database, key: string, after: number) =>
  db
    .select()
    .from(sessionEvents)
    .where(and(eq(sessionEvents.bucket, key), gt(sessionEvents.id, after)))
    .orderBy(sessionEvents.id)
    .limit(MOVE_PAGE);

/** The bucket's next page of sessions on the (frozen) source, by id after `after`. */
export async function readSessionsAfter(db: Database, key: string, after: string): Promise<MoveSessionRow[]> {
  return await sessionsAfterQuery(db, key, after);
}

/** The bucket's next page of events on the (frozen) source, by id after `after`. */
export async function readEventsAfter(db: Database, key: string, after: number): Promise<MoveEventRow[]> {
  return await eventsAfterQuery(db, key, after);
}

const insertSessions = (db: Database, rows: MoveSessionRow[]) =>
  chunks(rows, SESSION_ROWS_PER_INSERT).map((part) => db.insert(sessions).values(part));

// In the source's order, so events of one instant keep their order on the target. A new id on
// the target, above its last (src/db/schema.ts): this bucket's events go there in the order
// they had here, and the purge takes them when it reaches those ids.
const insertEvents = (db: Database, rows: MoveEventRow[]) =>
  chunks(rows, EVENT_ROWS_PER_INSERT).map((part) =>
    db.insert(sessionEvents).values(part.map(({ id: _, bucket: __, ...event }) => event)),
  );

/**
 * freeze, and the bucket's rows as that commit leaves them (the first page of its sessions
 * and events, its inbound SETs and upstream links, its members' organizations' policy rows):
 * one batch on the source. From that commit on no request writes the bucket there, so what is
 * read is what gets copied.
 */
export async function freezeBucket(source: Database, key: string, frozen: BucketMoveRow) {
  return batchNamed(source, {
    freeze: source.insert(bucketMoves).values(frozen).onConflictDoNothing({ target: bucketMoves.bucket }),
    firstSessions: sessionsAfterQuery(source, key, ""),
    firstEvents: eventsAfterQuery(source, key, 0),
    // Inbound SETs for the bucket's users within the last day (their maximum age): a
    // few rows, read at once, without an index on bucket.
    inbound: source.select().from(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
    // Upstream subjects whose link hashes to the bucket: one row per subject ever signed in,
    // about one per user of an upstream in it, read at once by its index.
    links: source.select().from(upstreamLinks).where(eq(upstreamLinks.bucket, key)),
    // The policy row of each organization any of the bucket's sessions (every page of them)
    // belongs to: a few rows, by the sessions' primary key and the policies'.
    policies: source
      .select()
      .from(organizationPolicies)
      .where(
        inArray(
          organizationPolicies.organizationId,
          source.selectDistinct({ id: sessions.organizationId }).from(sessions).where(inBucket(key)),
        ),
      ),
  });
}

export type FrozenRows = Awaited<ReturnType<typeof freezeBucket>>;

/**
 * copy, its first batch on the target: its `moved` row (so that nothing there changes the
 * bucket's rows, and a request reaching it early is sent back), what an interrupted copy left
 * cleared, and the rows the freeze read (a policy row only where the target has none of its
 * organization; the switch deletes none, as other buckets' members read them). A larger
 * bucket's further pages follow, each read from the source and written by `copySessions` and
 * `copyEvents`.
 */
export async function copyBucket(
  target: Database,
  key: string,
  arriving: BucketMoveRow,
  { firstSessions, firstEvents, inbound, links, policies }: FrozenRows,
): Promise<void> {
  await batchAll(target, [
    target.insert(bucketMoves).values(arriving).onConflictDoNothing({ target: bucketMoves.bucket }),
    target.delete(sessionEvents).where(eq(sessionEvents.bucket, key)),
    target.delete(sessions).where(inBucket(key)),
    target.delete(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
    target.delete(upstreamLinks).where(eq(upstreamLinks.bucket, key)),
    ...insertSessions(target, firstSessions),
    ...insertEvents(target, firstEvents),
    ...chunks(inbound, INBOUND_ROWS_PER_INSERT).map((part) => target.insert(ssfReceivedSets).values(part)),
    ...chunks(links, LINK_ROWS_PER_INSERT).map((part) => target.insert(upstreamLinks).values(part)),
    ...insertMissingPolicyRows(target, policies),
  ]);
}

/** A further page of the bucket's sessions written on the target, in one batch (none: no round trip). */
export function copySessions(target: Database, rows: MoveSessionRow[]): Promise<void> {
  return batchAll(target, insertSessions(target, rows));
}

/** A further page of the bucket's events written on the target, in one batch (none: no round trip). */
export function copyEvents(target: Database, rows: MoveEventRow[]): Promise<void> {
  return batchAll(target, insertEvents(target, rows));
}

/**
 * switch, one batch on the source: its row, if still frozen for `to`, becomes `moved`, and the
 * bucket's sessions, events, inbound SETs and upstream links there are deleted.
 */
export async function switchBucket(source: Database, key: string, to: string, now: Date): Promise<void> {
  await source.batch([
    source
      .update(bucketMoves)
      .set({ state: "moved", updatedAt: now })
      .where(and(eq(bucketMoves.bucket, key), eq(bucketMoves.state, "frozen"), eq(bucketMoves.binding, to))),
    source.delete(sessionEvents).where(eq(sessionEvents.bucket, key)),
    source.delete(sessions).where(inBucket(key)),
    source.delete(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
    source.delete(upstreamLinks).where(eq(upstreamLinks.bucket, key)),
  ]);
}

/** open: the target's row, which sent requests back to `source`, goes. */
export async function openBucket(target: Database, key: string, source: string): Promise<void> {
  await target
    .delete(bucketMoves)
    .where(and(eq(bucketMoves.bucket, key), eq(bucketMoves.state, "moved"), eq(bucketMoves.binding, source)));
}

/** Every move row of `db`: the buckets frozen here, or moved from here. */
export async function readMoveRows(db: Database): Promise<BucketMoveRow[]> {
  return await db.select().from(bucketMoves);
}

/** Drops the move rows of `buckets` on `db`, in one batch (none: no round trip). */
export function dropMoveRows(db: Database, buckets: string[]): Promise<void> {
  // D1 binds at most 100 values per statement.
  return batchAll(
    db,
    chunks(buckets, 100).map((part) => db.delete(bucketMoves).where(inArray(bucketMoves.bucket, part))),
  );
}
