import { and, eq, isNull, sql } from "drizzle-orm";
import { bucketNotMoving, moveOf, onBucket } from "./buckets.ts";
import { batchNamed } from "./client.ts";
import { upstreamLinks } from "./schema.ts";
import type { BucketShard } from "./shards.ts";

// Which user an upstream's subject is: its logout and revocation name the subject, and the
// user's database follows from the user. One row per (upstream, subject), in the bucket that
// pair hashes to (src/services/upstream-links.ts), so any worker finds it with no scan.

export interface UpstreamLink {
  upstream: string;
  subject: string;
  userId: string;
  region: string | null;
}

/**
 * Writes the link, or rewrites it when the subject's user or region changed, unless its bucket
 * is being moved (then BucketMoving, nothing written). One batch: the upsert guarded by the move
 * state, which keeps the user it moved the link from and this write's id (`writeId`, bound into
 * the batch, so the same on a replay); the link as written; that state. Answers the user the
 * link named before when this write moved it from another one, read back by the write's id: a
 * replay of a batch that committed answers it too (src/db/writes.ts), so the relink's endings
 * are not lost with the first answer.
 */
export function writeLink(
  shard: BucketShard,
  link: UpstreamLink,
  writeId: string,
): Promise<{ userId: string; region: string | null } | null> {
  return onBucket(shard, async (db) => {
    const row = sql`SELECT ${link.upstream}, ${link.subject}, ${link.userId}, ${link.region}, ${shard.bucket}, ${writeId}, NULL, NULL WHERE ${bucketNotMoving(db, shard.bucket)}`;
    const movedFromAnother = sql`${upstreamLinks.userId} IS NOT excluded.user_id`;
    const { written, move } = await batchNamed(db, {
      // The WHERE also keeps SQLite from reading ON CONFLICT as a join's ON. The SET reads the row as it was.
      upsert: db
        .insert(upstreamLinks)
        .select(row)
        .onConflictDoUpdate({
          target: [upstreamLinks.upstream, upstreamLinks.subject],
          set: {
            userId: sql`excluded.user_id`,
            region: sql`excluded.region`,
            writtenBy: sql`excluded.written_by`,
            previousUserId: sql`CASE WHEN ${movedFromAnother} THEN ${upstreamLinks.userId} END`,
            previousRegion: sql`CASE WHEN ${movedFromAnother} THEN ${upstreamLinks.region} END`,
          },
          setWhere: sql`${movedFromAnother} OR ${upstreamLinks.region} IS NOT excluded.region`,
        }),
      written: db
        .select({
          writtenBy: upstreamLinks.writtenBy,
          previousUserId: upstreamLinks.previousUserId,
          previousRegion: upstreamLinks.previousRegion,
        })
        .from(upstreamLinks)
        .where(
          and(
            eq(upstreamLinks.upstream, link.upstream),
            eq(upstreamLinks.subject, link.subject),
            eq(upstreamLinks.userId, link.userId),
            link.region === null ? isNull(upstreamLinks.region) : eq(upstreamLinks.region, link.region),
          ),
        ),
      move: moveOf(db, shard.bucket),
    });
    const mine = written[0]?.writtenBy === writeId ? written[0] : undefined;
    const previous = mine?.previousUserId == null ? null : { userId: mine.previousUserId, region: mine.previousRegion };
    return { answer: previous, move: move[0], blocked: written.length === 0 };
  });
}

/** The user (and home region) the upstream's subject is; null when no sign-in linked it. */
export function readLink(
  shard: BucketShard,
  upstream: string,
  subject: string,
): Promise<{ userId: string; region: string | null } | null> {
  return onBucket(shard, async (db) => {
    const { link, move } = await batchNamed(db, {
      link: db
        .select({ userId: upstreamLinks.userId, region: upstreamLinks.region })
        .from(upstreamLinks)
        .where(and(eq(upstreamLinks.upstream, upstream), eq(upstreamLinks.subject, subject))),
      move: moveOf(db, shard.bucket),
    });
    return { answer: link[0] ?? null, move: move[0], blocked: false };
  });
}
