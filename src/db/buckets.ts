import { eq, notExists, type Placeholder, type SQL, sql } from "drizzle-orm";
import { BucketMoving } from "../domain/errors.ts";
import { RANDOM_LENGTH } from "../domain/token.ts";
import type { Database } from "./client.ts";
import { type BucketMoveRow, bucketMoves, sessions } from "./schema.ts";
import type { BucketShard } from "./shards.ts";

// A bucket can be moved to another database while the service runs (src/services/moves.ts). Every
// per-user batch also reads its bucket's move state, and every write is guarded by the
// state of its row's bucket, in the same transaction: `onBucket` turns the state into the
// answer, a 503 `moving`, or the same operation on the database the bucket went to.

/**
 * A write may change this session row: its bucket (the id without its random part) is not
 * being moved away from this database, nor gone from it. The guard of every write.
 */
const NOT_MOVING = sql`NOT EXISTS (SELECT 1 FROM ${bucketMoves} WHERE ${bucketMoves.bucket} = substr(${sessions.id}, 1, length(${sessions.id}) - ${RANDOM_LENGTH}))`;

export function notMoving(): SQL {
  return NOT_MOVING;
}

/**
 * The bucket is not being moved: the guard of a write whose row is no session (a new session's
 * INSERT, an upstream's link, a token's memory or its record for a subject), which `notMoving` cannot read off.
 */
export function bucketNotMoving(db: Database, bucket: string): SQL {
  return notExists(db.select({ one: sql`1` }).from(bucketMoves).where(eq(bucketMoves.bucket, bucket)));
}

/** The bucket's move state on this database: the last statement of every per-user batch. */
export function moveOf(db: Database, bucket: string) {
  return db
    .select({ state: bucketMoves.state, binding: bucketMoves.binding })
    .from(bucketMoves)
    .where(eq(bucketMoves.bucket, bucket));
}

type MoveState = Pick<BucketMoveRow, "state" | "binding">;

/**
 * The bucket's move state as one value, for a column of a statement that answers exactly one
 * row (src/db/authenticated.ts `callerRow`): read in the batch's one transaction, it is the
 * same wherever the batch reads it, and costs no statement of its own.
 */
export function moveState(bucket: string | Placeholder): SQL<MoveState | undefined> {
  return sql`(SELECT json_array(${bucketMoves.state}, ${bucketMoves.binding}) FROM ${bucketMoves} WHERE ${bucketMoves.bucket} = ${bucket})`.mapWith(
    moveStateOf,
  );
}

/** `moveState`'s value as D1 answers it, decoded. */
export function moveStateOf(json: unknown): MoveState | undefined {
  if (typeof json !== "string") return undefined;
  const [state, binding] = JSON.parse(json) as [MoveState["state"], string];
  return { state, binding };
}

/** A moved bucket is followed this many times at most (a move of a move, before SHARDS caught up). */
const MAX_FORWARDS = 3;

interface BucketAnswer<T> {
  answer: T;
  move: MoveState | undefined;
  /** A write that changed nothing: the freeze may be why. Reads: false. */
  blocked: boolean;
}

/**
 * Runs one operation (`run`: one batch that reads the bucket's move state, `moveOf` or
 * `moveState`) on the shard's bucket. No move:
 * the answer. `frozen` (being copied away): a read's answer stands, since the rows here stay
 * the truth until the move's last step (its activity touch was skipped); a write that did
 * something before the freeze answers that, any other was held back: BucketMoving. `moved`:
 * nothing of the bucket is here, so the same operation runs where it went: one more round
 * trip, until SHARDS names that database. A target this worker has no binding for (named in
 * the BucketMoving, for its log line), a loop or a chain too long: BucketMoving.
 */
export async function onBucket<T>(shard: BucketShard, run: (db: Database) => Promise<BucketAnswer<T>>): Promise<T> {
  let current = shard;
  for (let forwards = 0; ; forwards++) {
    const { answer, move, blocked } = await run(current.db);
    if (!move || (move.state === "frozen" && !blocked)) return answer;
    if (move.state === "frozen") throw new BucketMoving();
    const next = forwards < MAX_FORWARDS ? current.elsewhere(move.binding) : null;
    if (!next) throw new BucketMoving(forwards < MAX_FORWARDS ? move.binding : null);
    current = next;
  }
}
