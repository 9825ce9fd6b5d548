import { and, eq, isNull, sql } from "drizzle-orm";
import { bucketNotMoving, moveOf, onBucket } from "../buckets.ts";
import { batchNamed } from "../client.ts";
import { ssfReceivedSets, upstreamLinks } from "../schema.ts";
import type { BucketShard } from "../shards.ts";

// Which user an upstream's subject is: its logout and revocation name the subject, and the
// user's database follows from the user. One row per (upstream, subject), in the bucket that
// pair hashes to (src/services/upstreams/links.ts), so any worker finds it with no scan.

export interface UpstreamLink {
  upstream: string;
  subject: string;
  userId: string;
  region: string | null;
}

/**
 * Writes the link, or rewrites it when the subject's user or region changed, unless its bucket
 * is being moved (then BucketMoving, nothing written). One batch: the upsert guarded by the move
 * state, which keeps the user it moved the link from; the link as written; that state. Answers
 * that user while it is kept, until `settleLink`: so a replay of a batch that committed, and a
 * retry of a sign-in that failed before that user's sessions ended, both answer it, and the
 * relink's endings are not lost.
 */
export function writeLink(
  shard: BucketShard,
  link: UpstreamLink,
): Promise<{ userId: string; region: string | null } | null> {
  return onBucket(shard, async (db) => {
    const row = sql`SELECT ${link.upstream}, ${link.subject}, ${link.userId}, ${link.region}, ${shard.bucket}, NULL, NULL WHERE ${bucketNotMoving(db, shard.bucket)}`;
    const moved = sql`${upstreamLinks.userId} IS NOT excluded.user_id`;
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
            previousUserId: sql`CASE WHEN ${moved} THEN ${upstreamLinks.userId} ELSE ${upstreamLinks.previousUserId} END`,
            previousRegion: sql`CASE WHEN ${moved} THEN ${upstreamLinks.region} ELSE ${upstreamLinks.previousRegion} END`,
          },
          setWhere: sql`${moved} OR ${upstreamLinks.region} IS NOT excluded.region`,
        }),
      written: db
        .select({ userId: upstreamLinks.previousUserId, region: upstreamLinks.previousRegion })
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
    const kept = written[0];
    const previous = kept?.userId == null ? null : { userId: kept.userId, region: kept.region };
    return { answer: previous, move: move[0], blocked: written.length === 0 };
  });
}

/**
 * Forgets the user `writeLink` moved the link from, once that user's sessions as the subject
 * ended; unless another sign-in moved it since (the user kept is then another) or the bucket
 * is being moved (then it is kept, and the next sign-in ends nothing more and settles it).
 */
export function settleLink(shard: BucketShard, link: UpstreamLink, previousUserId: string): Promise<void> {
  return onBucket(shard, async (db) => {
    const { move } = await batchNamed(db, {
      settled: db
        .update(upstreamLinks)
        .set({ previousUserId: null, previousRegion: null })
        .where(
          and(
            eq(upstreamLinks.upstream, link.upstream),
            eq(upstreamLinks.subject, link.subject),
            eq(upstreamLinks.previousUserId, previousUserId),
            bucketNotMoving(db, shard.bucket),
          ),
        ),
      move: moveOf(db, shard.bucket),
    });
    return { answer: undefined, move: move[0], blocked: false };
  });
}

/**
 * The user (and home region) the upstream's subject is; null when no sign-in linked it. For a
 * SET (`set`), in the same batch, the SET is remembered here when no sign-in linked the subject,
 * unless the bucket is being moved (then BucketMoving, nothing written); null also when there
 * was no link when the SET first came: it spoke of no one here, so sent again once a sign-in
 * linked the subject, it acts on nothing still.
 */
export function readLink(
  shard: BucketShard,
  upstream: string,
  subject: string,
  set?: { issuer: string; jti: string; at: Date },
): Promise<{ userId: string; region: string | null } | null> {
  return onBucket(shard, async (db) => {
    const ofSubject = and(eq(upstreamLinks.upstream, upstream), eq(upstreamLinks.subject, subject));
    // Its own issuer text, so that this memory is never the one a SET's endings are guarded by.
    const issuer = set && `unlinked ${set.issuer}`;
    // Every column, in the table's order; the WHERE also keeps SQLite from reading ON CONFLICT as a join's ON.
    const row =
      set &&
      sql`SELECT ${issuer}, ${set.jti}, ${set.at.getTime()}, ${shard.bucket}, ${subject} WHERE NOT EXISTS (SELECT 1 FROM ${upstreamLinks} WHERE ${ofSubject}) AND ${bucketNotMoving(db, shard.bucket)}`;
    const { link, remembered, move } = await batchNamed(db, {
      remember: row ? db.insert(ssfReceivedSets).select(row).onConflictDoNothing() : null,
      link: db
        .select({ userId: upstreamLinks.userId, region: upstreamLinks.region })
        .from(upstreamLinks)
        .where(ofSubject),
      remembered: set
        ? db
            .select({ one: sql<number>`1` })
            .from(ssfReceivedSets)
            .where(and(eq(ssfReceivedSets.issuer, issuer as string), eq(ssfReceivedSets.jti, set.jti)))
        : null,
      move: moveOf(db, shard.bucket),
    });
    const unlinked = (remembered?.length ?? 0) > 0;
    return {
      answer: unlinked ? null : (link[0] ?? null),
      move: move[0],
      blocked: set !== undefined && link.length === 0 && !unlinked,
    };
  });
}
