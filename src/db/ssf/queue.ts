import { and, asc, count, eq, exists, gte, inArray, lt, lte, ne, or, type SQL, sql } from "drizzle-orm";
import { batchAll, batchNamed, type Database } from "../client.ts";
import { ssfQueuedSets, ssfReceivers, ssfStreamSubjects, ssfStreams } from "../schema.ts";

// The SETs waiting for streams (ssf_queued_sets), outside a receiver's own calls: session
// events queued for every stream that takes them, pushes that are due and how they went, and
// what waited too long. On the streams' database, one D1 round trip each.

/**
 * The columns of a SET queued, due now, for each stream an INSERT … SELECT over ssf_streams
 * selects, in the table's order.
 */
export function queuedFor(jti: string, claims: Record<string, unknown>, at: Date) {
  return {
    streamId: ssfStreams.id,
    jti: sql<string>`${jti}`.as("jti"),
    claims: sql<string>`${JSON.stringify(claims)}`.as("claims"),
    createdAt: sql<number>`${at.getTime()}`.as("created_at"),
    attempts: sql<number>`0`.as("attempts"),
    nextAttemptAt: sql<number>`${at.getTime()}`.as("next_attempt_at"),
    leasedBy: sql<null>`null`.as("leased_by"),
  };
}

/** A session event's SET before it is known which streams take it (src/services/ssf/session-sets.ts). */
export interface SessionSet {
  jti: string;
  /** The event type URI: a stream takes the SET only if it delivers this type. */
  type: string;
  userId: string;
  claims: Record<string, unknown>;
  createdAt: Date;
}

/** A SET for one destination alone: an upstream's (src/domain/upstreams/receivers.ts). */
export interface DestinedSet {
  destination: string;
  jti: string;
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
 * ones, and each destined SET for its destination, and answers whether any stream is not
 * disabled (one round trip). A resend of the same events queues nothing twice: same stream,
 * same jti.
 */
export async function queueSessionSets(
  db: Database,
  sets: SessionSet[],
  destined: DestinedSet[] = [],
): Promise<boolean> {
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
  const { live } = await batchNamed(db, {
    live: db.select({ one: sql`1` }).from(ssfStreams).where(ne(ssfStreams.status, "disabled")).limit(1),
    ...Object.fromEntries(inserts.map((insert, i) => [`queued${i}`, insert])),
    ...Object.fromEntries(
      destined.map((set, i) => [
        `destined${i}`,
        db
          .insert(ssfQueuedSets)
          .values({
            streamId: set.destination,
            jti: set.jti,
            claims: set.claims,
            createdAt: set.createdAt,
            nextAttemptAt: set.createdAt,
          })
          .onConflictDoNothing(),
      ]),
    ),
  });
  return live.length > 0;
}

/** A SET leased for a push. A destination's (no stream) has no endpoint, authorization or audience here. */
export interface DuePush {
  streamId: string;
  jti: string;
  claims: Record<string, unknown>;
  attempts: number;
  createdAt: Date;
  endpointUrl: string | null;
  authorizationHeader: string | null;
  audience: string | null;
}

/**
 * Leases the oldest SETs of enabled push streams whose next attempt is due, for a round of
 * pushes that holds them until `leaseUntil`: in one batch (one transaction, one round trip) they
 * are marked as this round's and put off to then, and read back. So a round that starts
 * meanwhile never leases them, and if this round dies before it records how they went, they are
 * due again once its lease runs out. `destinations` (the upstreams', src/domain/upstreams/receivers.ts):
 * their due SETs too, up to `limit` more; so those of every destination that starts with
 * `prefix` (organizations' providers, each read when pushed); with neither, the statements are
 * the streams' alone.
 */
export async function leaseDuePushes(
  db: Database,
  round: string,
  at: Date,
  leaseUntil: Date,
  limit: number,
  destinations: readonly string[] = [],
  prefix: string | null = null,
): Promise<DuePush[]> {
  const due = db
    .select({ streamId: ssfQueuedSets.streamId, jti: ssfQueuedSets.jti })
    .from(ssfQueuedSets)
    .innerJoin(ssfStreams, eq(ssfStreams.id, ssfQueuedSets.streamId))
    .where(
      and(
        eq(ssfStreams.deliveryMethod, "push"),
        eq(ssfStreams.status, "enabled"),
        lte(ssfQueuedSets.nextAttemptAt, at),
      ),
    )
    .orderBy(asc(ssfQueuedSets.nextAttemptAt))
    .limit(limit);
  const key = sql`(${ssfQueuedSets.streamId}, ${ssfQueuedSets.jti})`;
  const dueDestined = (destined: SQL | undefined) =>
    sql`${key} IN ${db
      .select({ streamId: ssfQueuedSets.streamId, jti: ssfQueuedSets.jti })
      .from(ssfQueuedSets)
      .where(and(destined, lte(ssfQueuedSets.nextAttemptAt, at)))
      .orderBy(asc(ssfQueuedSets.nextAttemptAt))
      .limit(limit)}`;
  // Every id that starts with the prefix: the range of the primary key from it to its next string.
  const prefixed = (start: string) =>
    and(gte(ssfQueuedSets.streamId, start), lt(ssfQueuedSets.streamId, `${start.slice(0, -1)}${nextChar(start)}`));
  const beside = [
    ...(destinations.length > 0 ? [dueDestined(inArray(ssfQueuedSets.streamId, [...destinations]))] : []),
    ...(prefix === null ? [] : [dueDestined(prefixed(prefix))]),
  ];
  const { due: leased } = await batchNamed(db, {
    lease: db
      .update(ssfQueuedSets)
      .set({ leasedBy: round, nextAttemptAt: leaseUntil })
      .where(beside.length > 0 ? or(sql`${key} IN ${due}`, ...beside) : sql`${key} IN ${due}`),
    due: db
      .select({
        streamId: ssfQueuedSets.streamId,
        jti: ssfQueuedSets.jti,
        claims: ssfQueuedSets.claims,
        attempts: ssfQueuedSets.attempts,
        createdAt: ssfQueuedSets.createdAt,
        endpointUrl: ssfStreams.endpointUrl,
        authorizationHeader: ssfStreams.authorizationHeader,
        audience: ssfReceivers.audience,
      })
      .from(ssfQueuedSets)
      // A destination's SETs have no stream.
      .leftJoin(ssfStreams, eq(ssfStreams.id, ssfQueuedSets.streamId))
      .leftJoin(ssfReceivers, eq(ssfReceivers.id, ssfStreams.receiverId))
      .where(eq(ssfQueuedSets.leasedBy, round)),
  });
  return leased;
}

/** The character after the last of `text`. */
const nextChar = (text: string) => String.fromCharCode(text.charCodeAt(text.length - 1) + 1);

/**
 * After a round of pushes (one round trip): forgets what was accepted or refused for good, and
 * puts off what failed, if the round still holds it (a round whose lease ran out leaves the SET
 * to the round that leased it since).
 */
export async function recordPushes(
  db: Database,
  round: string,
  done: { streamId: string; jti: string }[],
  retry: { streamId: string; jti: string; nextAttemptAt: Date }[],
): Promise<void> {
  const key = (set: { streamId: string; jti: string }) =>
    and(eq(ssfQueuedSets.streamId, set.streamId), eq(ssfQueuedSets.jti, set.jti), eq(ssfQueuedSets.leasedBy, round));
  const pairs = JSON.stringify(done.map((set) => [set.streamId, set.jti]));
  const statements = [
    ...(done.length > 0
      ? [
          db
            .delete(ssfQueuedSets)
            .where(
              and(
                sql`(${ssfQueuedSets.streamId}, ${ssfQueuedSets.jti}) IN (SELECT value ->> 0, value ->> 1 FROM json_each(${pairs}))`,
                eq(ssfQueuedSets.leasedBy, round),
              ),
            ),
        ]
      : []),
    ...retry.map((set) =>
      db
        .update(ssfQueuedSets)
        .set({ attempts: sql`${ssfQueuedSets.attempts} + 1`, nextAttemptAt: set.nextAttemptAt, leasedBy: null })
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
  const { lost } = await batchNamed(db, {
    lost: db
      .select({ streamId: ssfQueuedSets.streamId, dropped: count() })
      .from(ssfQueuedSets)
      .where(old)
      .groupBy(ssfQueuedSets.streamId),
    told: db
      .update(ssfStreams)
      .set({ reason: `SETs older than the retention were dropped on ${at.toISOString()}`, updatedAt: at })
      .where(inArray(ssfStreams.id, db.selectDistinct({ id: ssfQueuedSets.streamId }).from(ssfQueuedSets).where(old))),
    dropped: db.delete(ssfQueuedSets).where(old),
  });
  return lost;
}
