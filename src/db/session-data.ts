import { and, eq, type SQL, sql } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import { MAX_SESSION_DATA_BYTES, type SessionDataMode } from "../domain/session-data.ts";
import { moveState, notMoving, onBucket } from "./buckets.ts";
import { batchNamed } from "./client.ts";
import { inOrganization, isLive } from "./liveness.ts";
import { sessions } from "./schema.ts";
import type { BucketShard } from "./shards.ts";

// A session's application data (src/domain/session-data.ts) replaced or patched by its id, in
// one round trip that writes one row: the UPDATE of the live session's row, with the patch
// applied and its size checked in SQL, so two updates never race through a read in the
// worker and nothing over the limit is written. Not an event: it changes no session's life,
// and the security log and the SETs never carry the data.

/** What an update did: `updated`, or why not (no live session, or the merge would be too large). */
export type DataUpdate = { updated: true } | { updated: false; tooLarge: number | null };

/**
 * The row's data after the change, in SQL: `replace` the whole object with `json` (the checked
 * object's JSON text), or `merge` it into the data as an RFC 7396 JSON Merge Patch
 * (`json_patch`: a null member deletes its key, objects merge key by key at every depth,
 * anything else replaces). An empty object is none, NULL (`storedData`), by either way.
 */
function changed(mode: SessionDataMode, json: string): SQL<string | null> {
  return mode === "replace"
    ? sql`nullif(${json}, '{}')`
    : sql`nullif(json_patch(coalesce(${sessions.data}, '{}'), ${json}), '{}')`;
}

/** Bytes of a JSON text as stored (UTF-8), 0 for none. */
const bytesOf = (value: SQL) => sql<number>`coalesce(length(CAST(${value} AS BLOB)), 0)`;

/**
 * Replaces or patches the data of the live session `sessionId` (of `organization` when given), in one batch: the UPDATE,
 * guarded by liveness, the bucket's move state and the size of what it would write, and one
 * row read after it: the size the change gives (null: no live session) and the move state.
 * A replay (src/db/d1.ts) writes the same again: a replacement is the same value, and a merge
 * patch applied twice gives what it gave once (RFC 7396), so it answers truly either way.
 */
export async function updateSessionData(
  shard: BucketShard,
  sessionId: string,
  mode: SessionDataMode,
  json: string,
  at: Instant,
  organization: string | null = null,
): Promise<DataUpdate> {
  const live = and(eq(sessions.id, sessionId), isLive(at), inOrganization(organization));
  const next = changed(mode, json);
  return onBucket(shard, async (db) => {
    const { written, read } = await batchNamed(db, {
      written: db
        .update(sessions)
        .set({ data: next })
        .where(and(live, notMoving(), sql`${bytesOf(next)} <= ${MAX_SESSION_DATA_BYTES}`))
        .returning({ id: sessions.id }),
      // Exactly one row: what the change gives the live session (so why it was not written), and the move state.
      read: db
        .select({
          size: sql<number | null>`(SELECT ${bytesOf(next)} FROM ${sessions} WHERE ${live})`,
          move: moveState(shard.bucket),
        })
        .from(sql`(SELECT 1)`),
    });
    const row = read[0];
    const size = row?.size ?? null;
    const updated = written.length > 0;
    const answer: DataUpdate = updated
      ? { updated }
      : { updated, tooLarge: size !== null && size > MAX_SESSION_DATA_BYTES ? size : null };
    // A live session, within the limit, not written: its bucket is frozen for a move.
    const blocked = !updated && size !== null && size <= MAX_SESSION_DATA_BYTES;
    return { answer, move: row?.move, blocked };
  });
}
