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
 * is being moved (then BucketMoving, nothing written). One batch: the link as it was, the
 * upsert guarded by the move state, the link as written, and that state. Answers the user the
 * link named before when it was another one (a replay of a batch that committed reads it
 * rewritten already, and answers null).
 */
export function writeLink(
  shard: BucketShard,
  link: UpstreamLink,
): Promise<{ userId: string; region: string | null } | null> {
  return onBucket(shard, async (db) => {
    const row = sql`SELECT ${link.upstream}, ${link.subject}, ${link.userId}, ${link.region}, ${shard.bucket} WHERE ${bucketNotMoving(db, shard.bucket)}`;
    const key = and(eq(upstreamLinks.upstream, link.upstream), eq(upstreamLinks.subject, link.subject));
    const { before, written, move } = await batchNamed(db, {
      before: db.select({ userId: upstreamLinks.userId, region: upstreamLinks.region }).from(upstreamLinks).where(key),
      // The WHERE also keeps SQLite from reading ON CONFLICT as a join's ON.
      upsert: db
        .insert(upstreamLinks)
        .select(row)
        .onConflictDoUpdate({
          target: [upstreamLinks.upstream, upstreamLinks.subject],
          set: { userId: sql`excluded.user_id`, region: sql`excluded.region` },
          setWhere: sql`${upstreamLinks.userId} IS NOT excluded.user_id OR ${upstreamLinks.region} IS NOT excluded.region`,
        }),
      written: db
        .select({ userId: upstreamLinks.userId })
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
    const previous = before[0];
    const other = previous !== undefined && previous.userId !== link.userId ? previous : null;
    return { answer: other, move: move[0], blocked: written.length === 0 };
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
