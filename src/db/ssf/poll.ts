import { and, asc, eq, exists, inArray, lte, type SQL, sql } from "drizzle-orm";
import { batchNamed, type Database } from "../client.ts";
import { type QueuedSetRow, type StreamRow, ssfQueuedSets, ssfStreams } from "../schema.ts";
import { type Answer, ownStream, type ReceiverProof, receiverOf, streamIn } from "./receiver-reach.ts";

// Poll delivery (RFC 8936): a receiver's poll stream hands out its waiting SETs, and forgets
// those it acknowledged, in one D1 round trip on the streams' database.

/** A list as one bound JSON value: D1 binds at most 100 values per statement. */
function jsonList(values: string[]): SQL {
  return sql`(SELECT value FROM json_each(${JSON.stringify(values)}))`;
}

/** How long a polled SET that was not acknowledged waits before a poll hands it out again. */
export const REDELIVER_AFTER_MS = 60_000;

export interface Polled {
  stream: StreamRow | null;
  sets: QueuedSetRow[];
  moreAvailable: boolean;
}

/**
 * One poll (RFC 8936): forgets the SETs acknowledged or refused, then hands out up to `max`
 * of the oldest waiting ones, each again only after REDELIVER_AFTER_MS without an ack.
 * A stream that is not enabled hands out nothing; one that is not a poll stream changes nothing.
 */
export async function pollSets(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
  done: string[],
  max: number,
  at: Date,
): Promise<Answer<Polled>> {
  const pollable = and(ownStream(db, proof, streamId), eq(ssfStreams.deliveryMethod, "poll"));
  const isPollable = (also?: SQL) => exists(db.select({ one: sql`1` }).from(ssfStreams).where(and(pollable, also)));
  const enabled = isPollable(eq(ssfStreams.status, "enabled"));
  const waiting = and(eq(ssfQueuedSets.streamId, streamId), lte(ssfQueuedSets.nextAttemptAt, at), enabled);
  const next = db
    .select({ jti: ssfQueuedSets.jti })
    .from(ssfQueuedSets)
    .where(waiting)
    .orderBy(asc(ssfQueuedSets.jti))
    .limit(max);
  const { receiver, stream, handed, more } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    stream: streamIn(db, proof, streamId),
    forgotten: db
      .delete(ssfQueuedSets)
      .where(and(eq(ssfQueuedSets.streamId, streamId), isPollable(), sql`${ssfQueuedSets.jti} IN ${jsonList(done)}`)),
    handed: db
      .update(ssfQueuedSets)
      .set({ nextAttemptAt: new Date(at.getTime() + REDELIVER_AFTER_MS), attempts: sql`${ssfQueuedSets.attempts} + 1` })
      .where(and(eq(ssfQueuedSets.streamId, streamId), inArray(ssfQueuedSets.jti, next)))
      .returning(),
    more: db.select({ one: sql`1` }).from(ssfQueuedSets).where(waiting).limit(1),
  });
  return {
    receiver: receiver[0] ?? null,
    result: {
      stream: stream[0] ?? null,
      sets: handed.sort((a, b) => (a.jti < b.jti ? -1 : 1)),
      moreAvailable: more.length > 0,
    },
  };
}
