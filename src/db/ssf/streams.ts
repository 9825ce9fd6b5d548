import { and, asc, count, eq, exists, inArray, isNull, lt, lte, ne, or, type SQL, sql } from "drizzle-orm";
import { MAX_STREAMS_PER_RECEIVER, MIN_VERIFICATION_INTERVAL_SECONDS, type Status } from "../../domain/ssf/streams.ts";
import { batchAll, type Database } from "../client.ts";
import {
  type QueuedSetRow,
  type StreamRow,
  ssfQueuedSets,
  ssfReceivers,
  ssfStreamSubjects,
  ssfStreams,
} from "../schema.ts";

// The Shared Signals management statements, on the streams' database (src/db/shards.ts
// `streams`). Each is one D1 round trip, but an update, which reads what it merges first.
// The receiver's credential travels inside every statement (`isReceiver`), as a session
// token does: a receiver sees and changes only its own streams, and a revoked one nothing.

/** A receiver credential reduced to what is compared with the table (src/domain/token.ts `proveToken`). */
export interface ReceiverProof {
  id: string;
  secretHash: string;
}

/** What the management answers need of the authenticated receiver. */
export interface Receiver {
  id: string;
  audience: string;
}

/** A list as one bound JSON value: D1 binds at most 100 values per statement. */
function jsonList(values: string[]): SQL {
  return sql`(SELECT value FROM json_each(${JSON.stringify(values)}))`;
}

function isReceiver(proof: ReceiverProof): SQL {
  return and(
    eq(ssfReceivers.id, proof.id),
    eq(ssfReceivers.secretHash, proof.secretHash),
    isNull(ssfReceivers.revokedAt),
  ) as SQL;
}

function receiverOf(db: Database, proof: ReceiverProof) {
  return db
    .select({ id: ssfReceivers.id, audience: ssfReceivers.audience })
    .from(ssfReceivers)
    .where(isReceiver(proof));
}

/** The stream `streamId` of the receiver the proof authenticates. */
function ownStream(db: Database, proof: ReceiverProof, streamId: string): SQL {
  return and(
    eq(ssfStreams.id, streamId),
    eq(ssfStreams.receiverId, proof.id),
    exists(db.select({ one: sql`1` }).from(ssfReceivers).where(isReceiver(proof))),
  ) as SQL;
}

function streamIn(db: Database, proof: ReceiverProof, streamId: string) {
  return db
    .select()
    .from(ssfStreams)
    .where(ownStream(db, proof, streamId));
}

/** The receiver has the stream `streamId`: the guard of what a statement writes for it. */
function hasStream(db: Database, proof: ReceiverProof, streamId: string): SQL {
  return exists(
    db
      .select({ one: sql`1` })
      .from(ssfStreams)
      .where(ownStream(db, proof, streamId)),
  );
}

/** The rows of a stream's own table (subjects, queued SETs) that belong to `streamId` of this receiver. */
function ofOwnStream(
  db: Database,
  column: typeof ssfQueuedSets.streamId | typeof ssfStreamSubjects.streamId,
  proof: ReceiverProof,
  streamId: string,
): SQL {
  return and(eq(column, streamId), hasStream(db, proof, streamId)) as SQL;
}

/**
 * The columns of a SET queued, due now, for each stream an INSERT … SELECT over ssf_streams
 * selects, in the table's order.
 */
function queuedFor(jti: string, claims: Record<string, unknown>, at: Date) {
  return {
    streamId: ssfStreams.id,
    jti: sql<string>`${jti}`.as("jti"),
    claims: sql<string>`${JSON.stringify(claims)}`.as("claims"),
    createdAt: sql<number>`${at.getTime()}`.as("created_at"),
    attempts: sql<number>`0`.as("attempts"),
    nextAttemptAt: sql<number>`${at.getTime()}`.as("next_attempt_at"),
  };
}

export interface Answer<T> {
  /** Null: the credential is unknown or revoked (401); nothing was read or changed. */
  receiver: Receiver | null;
  result: T;
}

export async function streamsOf(db: Database, proof: ReceiverProof): Promise<Answer<StreamRow[]>> {
  const [[receiver], streams] = await db.batch([
    receiverOf(db, proof),
    db
      .select()
      .from(ssfStreams)
      .where(and(eq(ssfStreams.receiverId, proof.id), exists(receiverOf(db, proof))))
      .orderBy(asc(ssfStreams.createdAt), asc(ssfStreams.id)),
  ]);
  return { receiver: receiver ?? null, result: streams };
}

export async function streamOf(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
): Promise<Answer<StreamRow | null>> {
  const [[receiver], [stream]] = await db.batch([receiverOf(db, proof), streamIn(db, proof, streamId)]);
  return { receiver: receiver ?? null, result: stream ?? null };
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
  const [[receiver], , [created]] = await db.batch([
    receiverOf(db, proof),
    db
      .insert(ssfStreams)
      .select(
        sql`SELECT ${sql.join(
          values.map((value) => sql`${value}`),
          sql`, `,
        )} WHERE ${exists(receiverOf(db, proof))} AND (${owned}) < ${MAX_STREAMS_PER_RECEIVER}`,
      )
      .onConflictDoNothing(),
    streamIn(db, proof, stream.id),
  ]);
  return { receiver: receiver ?? null, result: created ?? null };
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
  const [[receiver], , [stream]] = await db.batch([
    receiverOf(db, proof),
    db
      .update(ssfStreams)
      .set({ ...change, updatedAt: at })
      .where(ownStream(db, proof, streamId)),
    streamIn(db, proof, streamId),
  ]);
  return { receiver: receiver ?? null, result: stream ?? null };
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
  const [[receiver], , , [stream]] = await db.batch([
    receiverOf(db, proof),
    db
      .update(ssfStreams)
      .set({ status, reason, updatedAt: at })
      .where(ownStream(db, proof, streamId)),
    db
      .delete(ssfQueuedSets)
      .where(and(ofOwnStream(db, ssfQueuedSets.streamId, proof, streamId), sql`${status} = 'disabled'`)),
    streamIn(db, proof, streamId),
  ]);
  return { receiver: receiver ?? null, result: stream ?? null };
}

/** Deletes the stream, its subjects and its waiting SETs; `result`: whether it existed. */
export async function deleteStream(db: Database, proof: ReceiverProof, streamId: string): Promise<Answer<boolean>> {
  const [[receiver], [stream]] = await db.batch([
    receiverOf(db, proof),
    streamIn(db, proof, streamId),
    db.delete(ssfStreamSubjects).where(ofOwnStream(db, ssfStreamSubjects.streamId, proof, streamId)),
    db.delete(ssfQueuedSets).where(ofOwnStream(db, ssfQueuedSets.streamId, proof, streamId)),
    db.delete(ssfStreams).where(ownStream(db, proof, streamId)),
  ]);
  return { receiver: receiver ?? null, result: stream !== undefined };
}

/** Adds (`included`) or removes a user from the stream; `result`: whether the stream exists. */
export async function setSubject(
  db: Database,
  proof: ReceiverProof,
  streamId: string,
  userId: string,
  included: boolean,
): Promise<Answer<boolean>> {
  const [[receiver], [stream]] = await db.batch([
    receiverOf(db, proof),
    db
      .select({ id: ssfStreams.id })
      .from(ssfStreams)
      .where(ownStream(db, proof, streamId)),
    db
      .insert(ssfStreamSubjects)
      .select(sql`SELECT ${streamId}, ${userId}, ${included ? 1 : 0} WHERE ${hasStream(db, proof, streamId)}`)
      .onConflictDoUpdate({
        target: [ssfStreamSubjects.streamId, ssfStreamSubjects.userId],
        set: { included: sql`excluded.${sql.identifier(ssfStreamSubjects.included.name)}` },
      }),
  ]);
  return { receiver: receiver ?? null, result: stream !== undefined };
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
  const [[receiver], [before]] = await db.batch([
    receiverOf(db, proof),
    streamIn(db, proof, streamId),
    db
      .update(ssfStreams)
      .set({ verificationRequestedAt: at })
      .where(and(ownStream(db, proof, streamId), due)),
    // Only after this batch's own update (or its replay's): the stream carries exactly `at`.
    db
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
  ]);
  return { receiver: receiver ?? null, result: before ?? null };
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
  const [[receiver], [stream], , handed, more] = await db.batch([
    receiverOf(db, proof),
    streamIn(db, proof, streamId),
    db
      .delete(ssfQueuedSets)
      .where(and(eq(ssfQueuedSets.streamId, streamId), isPollable(), sql`${ssfQueuedSets.jti} IN ${jsonList(done)}`)),
    db
      .update(ssfQueuedSets)
      .set({ nextAttemptAt: new Date(at.getTime() + REDELIVER_AFTER_MS), attempts: sql`${ssfQueuedSets.attempts} + 1` })
      .where(and(eq(ssfQueuedSets.streamId, streamId), inArray(ssfQueuedSets.jti, next)))
      .returning(),
    db.select({ one: sql`1` }).from(ssfQueuedSets).where(waiting).limit(1),
  ]);
  return {
    receiver: receiver ?? null,
    result: {
      stream: stream ?? null,
      sets: handed.sort((a, b) => (a.jti < b.jti ? -1 : 1)),
      moreAvailable: more.length > 0,
    },
  };
}

/** A session event's SET before it is known which streams take it (src/services/ssf/delivery.ts). */
export interface SessionSet {
  jti: string;
  /** The event type URI: a stream takes the SET only if it delivers this type. */
  type: string;
  userId: string;
  claims: Record<string, unknown>;
  createdAt: Date;
}

/** The stream carries events about `userId`: not removed, and either no one added or this user added. */
function carries(db: Database, userId: string): SQL {
  const subject = (also: SQL) =>
    exists(
      db
        .select({ one: sql`1` })
        .from(ssfStreamSubjects)
        .where(and(eq(ssfStreamSubjects.streamId, ssfStreams.id), also)),
    );
  return and(
    sql`not ${subject(and(eq(ssfStreamSubjects.userId, userId), eq(ssfStreamSubjects.included, false)) as SQL)}`,
    or(
      sql`not ${subject(eq(ssfStreamSubjects.included, true))}`,
      subject(and(eq(ssfStreamSubjects.userId, userId), eq(ssfStreamSubjects.included, true)) as SQL),
    ),
  ) as SQL;
}

/**
 * Queues each SET for every stream that delivers its type and carries its user, but disabled
 * ones, and answers whether any stream is not disabled (one round trip). A resend of the same
 * events queues nothing twice: same stream, same jti.
 */
export async function queueSessionSets(db: Database, sets: SessionSet[]): Promise<boolean> {
  const inserts = sets.map((set) =>
    db
      .insert(ssfQueuedSets)
      .select(
        db
          .select(queuedFor(set.jti, set.claims, set.createdAt))
          .from(ssfStreams)
          .where(
            and(
              ne(ssfStreams.status, "disabled"),
              sql`${set.type} IN (SELECT value FROM json_each(${ssfStreams.eventsDelivered}))`,
              carries(db, set.userId),
            ),
          ),
      )
      .onConflictDoNothing(),
  );
  const [live] = await db.batch([
    db.select({ one: sql`1` }).from(ssfStreams).where(ne(ssfStreams.status, "disabled")).limit(1),
    ...inserts,
  ]);
  return live.length > 0;
}

export interface DuePush {
  streamId: string;
  jti: string;
  claims: Record<string, unknown>;
  attempts: number;
  createdAt: Date;
  endpointUrl: string;
  authorizationHeader: string | null;
  audience: string;
}

/** The oldest SETs of enabled push streams whose next attempt is due. */
export function duePushes(db: Database, at: Date, limit: number): Promise<DuePush[]> {
  return db
    .select({
      streamId: ssfQueuedSets.streamId,
      jti: ssfQueuedSets.jti,
      claims: ssfQueuedSets.claims,
      attempts: ssfQueuedSets.attempts,
      createdAt: ssfQueuedSets.createdAt,
      endpointUrl: sql<string>`${ssfStreams.endpointUrl}`,
      authorizationHeader: ssfStreams.authorizationHeader,
      audience: ssfReceivers.audience,
    })
    .from(ssfQueuedSets)
    .innerJoin(ssfStreams, eq(ssfStreams.id, ssfQueuedSets.streamId))
    .innerJoin(ssfReceivers, eq(ssfReceivers.id, ssfStreams.receiverId))
    .where(
      and(
        eq(ssfStreams.deliveryMethod, "push"),
        eq(ssfStreams.status, "enabled"),
        lte(ssfQueuedSets.nextAttemptAt, at),
      ),
    )
    .orderBy(asc(ssfQueuedSets.nextAttemptAt))
    .limit(limit);
}

/** After a round of pushes: forget what was accepted or refused for good, put off what failed (one round trip). */
export async function recordPushes(
  db: Database,
  done: { streamId: string; jti: string }[],
  retry: { streamId: string; jti: string; nextAttemptAt: Date }[],
): Promise<void> {
  const key = (set: { streamId: string; jti: string }) =>
    and(eq(ssfQueuedSets.streamId, set.streamId), eq(ssfQueuedSets.jti, set.jti)) as SQL;
  const pairs = JSON.stringify(done.map((set) => [set.streamId, set.jti]));
  const statements = [
    ...(done.length > 0
      ? [
          db
            .delete(ssfQueuedSets)
            .where(
              sql`(${ssfQueuedSets.streamId}, ${ssfQueuedSets.jti}) IN (SELECT value ->> 0, value ->> 1 FROM json_each(${pairs}))`,
            ),
        ]
      : []),
    ...retry.map((set) =>
      db
        .update(ssfQueuedSets)
        .set({ attempts: sql`${ssfQueuedSets.attempts} + 1`, nextAttemptAt: set.nextAttemptAt })
        .where(key(set)),
    ),
  ];
  await batchAll(db, statements);
}

/**
 * Drops the SETs that waited longer than the retention, saying so in each stream's status
 * reason (one round trip). Answers how many each stream lost.
 */
export async function expireQueuedSets(
  db: Database,
  before: Date,
  at: Date,
): Promise<{ streamId: string; dropped: number }[]> {
  const old = lt(ssfQueuedSets.createdAt, before);
  const [lost] = await db.batch([
    db
      .select({ streamId: ssfQueuedSets.streamId, dropped: count() })
      .from(ssfQueuedSets)
      .where(old)
      .groupBy(ssfQueuedSets.streamId),
    db
      .update(ssfStreams)
      .set({ reason: `SETs older than the retention were dropped on ${at.toISOString()}`, updatedAt: at })
      .where(inArray(ssfStreams.id, db.selectDistinct({ id: ssfQueuedSets.streamId }).from(ssfQueuedSets).where(old))),
    db.delete(ssfQueuedSets).where(old),
  ]);
  return lost;
}
