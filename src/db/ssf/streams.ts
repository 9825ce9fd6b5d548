import { and, asc, count, eq, exists, isNull, lte, ne, or, sql } from "drizzle-orm";
import { MAX_STREAMS_PER_RECEIVER, MIN_VERIFICATION_INTERVAL_SECONDS, type Status } from "../../domain/ssf/streams.ts";
import { batchNamed, type Database } from "../client.ts";
import { type StreamRow, ssfQueuedSets, ssfStreamSubjects, ssfStreams } from "../schema.ts";
import { queuedFor } from "./queue.ts";
import {
  type Answer,
  hasStream,
  ofOwnStream,
  ownStream,
  type ReceiverProof,
  receiverOf,
  streamIn,
} from "./receiver-reach.ts";

// The Shared Signals management statements (SSF 1.0 §8), on the streams' database, each within
// what the receiver's credential reaches (src/db/ssf/receiver-reach.ts). Each is one D1 round
// trip, but an update, which reads what it merges first.

export async function streamsOf(db: Database, proof: ReceiverProof): Promise<Answer<StreamRow[]>> {
  const { receiver, streams } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    streams: db
      .select()
      .from(ssfStreams)
      .where(and(eq(ssfStreams.receiverId, proof.id), exists(receiverOf(db, proof))))
      .orderBy(asc(ssfStreams.createdAt), asc(ssfStreams.id)),
  });
  return { receiver: receiver[0] ?? null, result: streams };
}

export async function streamOf(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
): Promise<Answer<StreamRow | null>> {
  const { receiver, stream } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    stream: streamIn(db, proof, streamId),
  });
  return { receiver: receiver[0] ?? null, result: stream[0] ?? null };
}

export type NewStream = Omit<StreamRow, "receiverId" | "verificationRequestedAt" | "reason">;

/**
 * Creates the stream unless the receiver already has MAX_STREAMS_PER_RECEIVER; `result` is
 * null then. A replayed batch finds the stream its first attempt made (same id) and keeps it.
 */
export async function createStream(
  db: Database,
  proof: ReceiverProof,
  stream: NewStream,
): Promise<Answer<StreamRow | null>> {
  const owned = db.select({ n: count() }).from(ssfStreams).where(eq(ssfStreams.receiverId, proof.id));
  // In the table's column order, as SQL: an INSERT … SELECT guarded by the credential and the cap.
  const row: NewStream & { receiverId: string } = { ...stream, receiverId: proof.id };
  const values = [
    row.id,
    row.receiverId,
    JSON.stringify(row.eventsRequested),
    JSON.stringify(row.eventsDelivered),
    row.deliveryMethod,
    row.endpointUrl,
    row.authorizationHeader,
    row.description,
    row.status,
    null,
    row.createdAt.getTime(),
    row.updatedAt.getTime(),
    null,
  ];
  const { receiver, created } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    inserted: db
      .insert(ssfStreams)
      .select(
        sql`SELECT ${sql.join(
          values.map((value) => sql`${value}`),
          sql`, `,
        )} WHERE ${exists(receiverOf(db, proof))} AND (${owned}) < ${MAX_STREAMS_PER_RECEIVER}`,
      )
      .onConflictDoNothing(),
    created: streamIn(db, proof, stream.id),
  });
  return { receiver: receiver[0] ?? null, result: created[0] ?? null };
}

export type StreamChange = Pick<
  StreamRow,
  "eventsRequested" | "eventsDelivered" | "deliveryMethod" | "endpointUrl" | "authorizationHeader" | "description"
>;

/** Writes what an update or a replace decided; `result` is the stream after, null if it is gone. */
export async function changeStream(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
  change: StreamChange,
  at: Date,
): Promise<Answer<StreamRow | null>> {
  const { receiver, stream } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    changed: db
      .update(ssfStreams)
      .set({ ...change, updatedAt: at })
      .where(ownStream(db, proof, streamId)),
    stream: streamIn(db, proof, streamId),
  });
  return { receiver: receiver[0] ?? null, result: stream[0] ?? null };
}

/** A disabled stream holds nothing (SSF 1.0 §8.1.2): its waiting SETs go with the change. */
export async function setStreamStatus(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
  status: Status,
  reason: string | null,
  at: Date,
): Promise<Answer<StreamRow | null>> {
  const { receiver, stream } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    changed: db
      .update(ssfStreams)
      .set({ status, reason, updatedAt: at })
      .where(ownStream(db, proof, streamId)),
    dropped: db
      .delete(ssfQueuedSets)
      .where(and(ofOwnStream(db, ssfQueuedSets.streamId, proof, streamId), sql`${status} = 'disabled'`)),
    stream: streamIn(db, proof, streamId),
  });
  return { receiver: receiver[0] ?? null, result: stream[0] ?? null };
}

/** Deletes the stream, its subjects and its waiting SETs; `result`: whether it existed. */
export async function deleteStream(db: Database, proof: ReceiverProof, streamId: string): Promise<Answer<boolean>> {
  const { receiver, stream } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    stream: streamIn(db, proof, streamId),
    subjects: db.delete(ssfStreamSubjects).where(ofOwnStream(db, ssfStreamSubjects.streamId, proof, streamId)),
    queued: db.delete(ssfQueuedSets).where(ofOwnStream(db, ssfQueuedSets.streamId, proof, streamId)),
    deleted: db.delete(ssfStreams).where(ownStream(db, proof, streamId)),
  });
  return { receiver: receiver[0] ?? null, result: stream.length > 0 };
}

/** Adds (`included`) or removes a user from the stream; `result`: whether the stream exists. */
export async function setSubject(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
  userId: string,
  included: boolean,
): Promise<Answer<boolean>> {
  const { receiver, stream } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    stream: db
      .select({ id: ssfStreams.id })
      .from(ssfStreams)
      .where(ownStream(db, proof, streamId)),
    subject: db
      .insert(ssfStreamSubjects)
      .select(sql`SELECT ${streamId}, ${userId}, ${included ? 1 : 0} WHERE ${hasStream(db, proof, streamId)}`)
      .onConflictDoUpdate({
        target: [ssfStreamSubjects.streamId, ssfStreamSubjects.userId],
        set: { included: sql`excluded.${sql.identifier(ssfStreamSubjects.included.name)}` },
      }),
  });
  return { receiver: receiver[0] ?? null, result: stream.length > 0 };
}

/**
 * Queues a verification SET (`claims`, jti inside) unless one was asked for within
 * MIN_VERIFICATION_INTERVAL_SECONDS; a disabled stream records the request and queues nothing.
 * `result`: the stream as it was before, null if there is none.
 */
export async function requestVerification(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
  jti: string,
  claims: Record<string, unknown>,
  at: Date,
): Promise<Answer<StreamRow | null>> {
  const earliest = new Date(at.getTime() - MIN_VERIFICATION_INTERVAL_SECONDS * 1000);
  const due = or(isNull(ssfStreams.verificationRequestedAt), lte(ssfStreams.verificationRequestedAt, earliest));
  const { receiver, before } = await batchNamed(db, {
    receiver: receiverOf(db, proof),
    before: streamIn(db, proof, streamId),
    requested: db
      .update(ssfStreams)
      .set({ verificationRequestedAt: at })
      .where(and(ownStream(db, proof, streamId), due)),
    // Only after this batch's own update (or its replay's): the stream carries exactly `at`.
    queued: db
      .insert(ssfQueuedSets)
      .select(
        db
          .select(queuedFor(jti, claims, at))
          .from(ssfStreams)
          .where(
            and(
              ownStream(db, proof, streamId),
              eq(ssfStreams.verificationRequestedAt, at),
              ne(ssfStreams.status, "disabled"),
            ),
          ),
      )
      .onConflictDoNothing(),
  });
  return { receiver: receiver[0] ?? null, result: before[0] ?? null };
}
