import { and, eq, exists, isNull, type SQL, sql } from "drizzle-orm";
import type { Database } from "../client.ts";
import { type ssfQueuedSets, ssfReceivers, type ssfStreamSubjects, ssfStreams } from "../schema.ts";

// What a receiver's credential reaches, for the statements of its own calls (management and
// poll), on the streams' database (src/db/shards.ts `streams`). The credential travels inside
// every statement (`isReceiver`), as a session token does: a receiver sees and changes only
// its own streams, and a revoked one nothing.

/** A receiver credential reduced to what is compared with the table (src/domain/token.ts `parseCredential`). */
export interface ReceiverProof {
  id: string;
  secretHash: string;
}

/** What the management answers need of the authenticated receiver. */
export interface Receiver {
  id: string;
  audience: string;
}

function isReceiver(proof: ReceiverProof): SQL {
  return and(
    eq(ssfReceivers.id, proof.id),
    eq(ssfReceivers.secretHash, proof.secretHash),
    isNull(ssfReceivers.revokedAt),
  ) as SQL;
}

export function receiverOf(db: Database, proof: ReceiverProof) {
  return db
    .select({ id: ssfReceivers.id, audience: ssfReceivers.audience })
    .from(ssfReceivers)
    .where(isReceiver(proof));
}

/** The stream `streamId` of the receiver the proof authenticates. */
export function ownStream(db: Database, proof: ReceiverProof, streamId: string): SQL {
  return and(
    eq(ssfStreams.id, streamId),
    eq(ssfStreams.receiverId, proof.id),
    exists(db.select({ one: sql`1` }).from(ssfReceivers).where(isReceiver(proof))),
  ) as SQL;
}

export function streamIn(db: Database, proof: ReceiverProof, streamId: string) {
  return db
    .select()
    .from(ssfStreams)
    .where(ownStream(db, proof, streamId));
}

/** The receiver has the stream `streamId`: the guard of what a statement writes for it. */
export function hasStream(db: Database, proof: ReceiverProof, streamId: string): SQL {
  return exists(
    db
      .select({ one: sql`1` })
      .from(ssfStreams)
      .where(ownStream(db, proof, streamId)),
  );
}

/** The rows of a stream's own table (subjects, queued SETs) that belong to `streamId` of this receiver. */
export function ofOwnStream(
  db: Database,
  column: typeof ssfQueuedSets.streamId | typeof ssfStreamSubjects.streamId,
  proof: ReceiverProof,
  streamId: string,
): SQL {
  return and(eq(column, streamId), hasStream(db, proof, streamId)) as SQL;
}

export interface Answer<T> {
  /** Null: the credential is unknown or revoked (401); nothing was read or changed. */
  receiver: Receiver | null;
  result: T;
}
