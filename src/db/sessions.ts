import { and, eq, ne, type Placeholder, type SQL, sql } from "drizzle-orm";
import type { ClientContext } from "../domain/client-context.ts";
import type { Instant } from "../domain/clock.ts";
import type { EventType } from "../domain/events.ts";
import type { BackendSessionView, JsonText, SessionView } from "../domain/session-view.ts";
import { authenticated, type ByToken, callerAndMove, callerValue, type TokenOperation, tail } from "./authenticated.ts";
import { moveState, moveStateOf, onBucket } from "./buckets.ts";
import { batchNamed, type Database } from "./client.ts";
import { type ContextCheck, changeOf } from "./client-context.ts";
import { batchCompiled, compiledAll, placeholders } from "./compiled.ts";
import {
  type At,
  type Caller,
  isFreshCaller,
  isLive,
  isLiveSessionOfCaller,
  isProvenBy,
  isUsersOwn,
  type TokenProof,
} from "./liveness.ts";
import { sessions } from "./schema.ts";
import { arrayText, BACKEND_SESSION_VIEW, SESSION_VIEW, sessionListJson } from "./session-view.ts";
import type { BucketShard, Shard } from "./shards.ts";
import {
  type EventDetails,
  endSessions,
  type Logged,
  loggedBy,
  newWrite,
  recordEvents,
  type Writer,
} from "./writes.ts";

// The statements of an issued session's life: checking a token, listing a user's sessions and
// ending them. Issuing (a new session, a new secret) is issuing.ts.

/** The token's live session (refreshing its activity, judging its context), or null. */
export async function authenticate(
  shard: BucketShard,
  proof: TokenProof,
  at: Instant,
  check: ContextCheck | null,
  writer: Writer,
): Promise<Logged<Caller | null>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  return onBucket(shard, async (db) => {
    const head = authenticated(db, token, true);
    const { contextEvents, read } = await batchCompiled(db, {
      ...head.statements(),
      read: head.callerRow("authenticate", shard.bucket),
    });
    const { caller, move } = callerAndMove(read[0]);
    const answer = { answer: caller, events: head.events(contextEvents), db };
    return { answer, move, blocked: caller?.contextUnrecorded === true };
  });
}

/**
 * The caller (null when the token is not live) and its user's live sessions, newest first
 * (none when the caller is held for step-up), as the list shows them: one JSON value of one row
 * (src/db/session-view.ts), which carries the caller too, so a list by token costs no statement
 * of its own to prove it.
 */
export async function listSessionsByToken(
  shard: BucketShard,
  proof: TokenProof,
  at: Instant,
  check: ContextCheck | null,
  writer: Writer,
): Promise<Logged<{ caller: Caller | null; sessions: JsonText<SessionView[]> }>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  return onBucket(shard, async (db) => {
    const head = authenticated(db, token, true);
    const { contextEvents, listed: rows } = await batchCompiled(db, {
      ...head.statements(),
      // An aggregate: exactly one row, so it carries the caller and the move state too.
      // Rendered once per shape, as the head is: it is most of a list's CPU otherwise.
      listed: head.also("list", { bucket: shard.bucket }, (t, unrecorded, P) =>
        db
          .select({
            list: sessionListJson(SESSION_VIEW).as("list"),
            caller: callerValue(t.proof, t.at, unrecorded).as("caller"),
            move: moveState(P("bucket")).as("move"),
          })
          .from(sessions)
          .where(isLiveSessionOfCaller(t.proof, t.at)),
      ),
    });
    const row = rows[0];
    const { caller, move } = callerAndMove(row);
    const answer = { caller, sessions: arrayText<SessionView>(row?.list) };
    return {
      answer: { answer, events: head.events(contextEvents), db },
      move,
      blocked: caller?.contextUnrecorded === true,
    };
  });
}

/**
 * A user's live sessions in the list's order, for the rest of the system (no token, no touch):
 * one statement, its one row carrying the bucket's move state too, rendered once per shape as
 * the statements by token are (src/db/compiled.ts).
 */
export async function listSessionsByUserId(
  shard: BucketShard,
  userId: string,
  at: Instant,
): Promise<JsonText<BackendSessionView[]>> {
  return onBucket(shard, async (db) => {
    type Input = { userId: string; at: Pick<At, "now" | "idleCutoff">; bucket: string };
    const build = ({ userId, at, bucket }: Input) =>
      db
        .select({
          list: sessionListJson<BackendSessionView>(BACKEND_SESSION_VIEW).as("list"),
          move: moveState(bucket).as("move"),
        })
        .from(sessions)
        .where(and(eq(sessions.userId, userId), isLive(at)));
    // As the head's (src/db/authenticated.ts): the shape is the placeholders, what changes the text.
    const { values, value, instant } = placeholders();
    const input: Input = {
      userId: value("userId", userId),
      at: { now: instant("now", at.now), idleCutoff: at.idleCutoff && instant("idleCutoff", at.idleCutoff) },
      bucket: value("bucket", shard.bucket),
    };
    const { listed } = await batchCompiled(db, {
      listed: compiledAll({
        shape: `userList:${JSON.stringify(input)}`,
        once: () => build(input),
        values,
        fresh: () => build({ userId, at, bucket: shard.bucket }),
      }),
    });
    const row = listed[0];
    return { answer: arrayText<BackendSessionView>(row?.list), move: moveStateOf(row?.move), blocked: false };
  });
}

/**
 * Ends every live session matching `ending` (built on the database the batch runs on), each
 * logged as `type` with `details`, in one batch; answers how many ended, from the events this
 * write logged by either attempt of the batch: one per ended session.
 */
function endMatching(
  shard: BucketShard,
  type: EventType,
  ending: (db: Database) => SQL | undefined,
  writer: Writer,
  at: Instant,
  details: EventDetails = {},
): Promise<Logged<number>> {
  const write = newWrite(at.now);
  return onBucket(shard, async (db) => {
    const matching = ending(db);
    const { logged, move } = await batchNamed(db, {
      recorded: recordEvents(db, type, matching, writer, write, details),
      ended: endSessions(db, matching),
      ...tail(db, write, shard.bucket),
    });
    return { answer: { answer: logged.length, events: logged, db }, move: move[0], blocked: logged.length === 0 };
  });
}

/** The same write, answering whether it ended anything. */
function endedAny({ answer, ...logged }: Logged<number>): Logged<boolean> {
  return { answer: answer > 0, ...logged };
}

/** Ends every live session of `userId` but `exceptSessionId`, logging `ended` with the reason. */
export async function endSessionsByUserId(
  shard: BucketShard,
  userId: string,
  exceptSessionId: string | null,
  reason: string,
  writer: Writer,
  at: Instant,
): Promise<Logged<number>> {
  const ending = and(
    eq(sessions.userId, userId),
    isLive(at),
    exceptSessionId === null ? undefined : ne(sessions.id, exceptSessionId),
  );
  return endMatching(shard, "ended", () => ending, writer, at, { reason });
}

/**
 * Ends every live session of `userId` signed in through the upstream as the subject, logging
 * `ended` with the reason and, as the event's context, each session's last seen and `cause`'s
 * (the sign-in that ended them).
 */
export async function endUpstreamSubjectSessions(
  shard: BucketShard,
  userId: string,
  signIn: { upstream: string; subject: string },
  reason: string,
  writer: Writer,
  at: Instant,
  cause: ClientContext,
): Promise<Logged<number>> {
  const ending = and(
    eq(sessions.userId, userId),
    eq(sessions.upstream, signIn.upstream),
    eq(sessions.upstreamSubject, signIn.subject),
    isLive(at),
  );
  return endMatching(shard, "ended", () => ending, writer, at, { reason, context: changeOf(cause) });
}

/** Ends one live session by id (no token), logging `ended` with the reason. */
export async function endSessionById(
  shard: BucketShard,
  sessionId: string,
  reason: string,
  writer: Writer,
  at: Instant,
): Promise<Logged<boolean>> {
  const ending = and(eq(sessions.id, sessionId), isLive(at));
  return endedAny(await endMatching(shard, "ended", () => ending, writer, at, { reason }));
}

/**
 * What an operation by token ends, built on the token it is given (the head's placeholders, so
 * the statements are rendered once per shape), `target` a placeholder for a target id.
 */
type Ending = (token: TokenOperation, target: Placeholder) => SQL | undefined;

/**
 * Ends the sessions `ending` matches, logged as `type`, in a batch that first judges the
 * caller's context, then refreshes and reads the token's caller; `name` tells its statements
 * apart from other operations'. `proven`: the token was live when the request ran (its session
 * may be among those ended, by this operation, not by the context check).
 */
function endForCaller(
  shard: BucketShard,
  token: ByToken,
  type: EventType,
  name: string,
  ending: Ending,
  targetId: string | null = null,
): Promise<Logged<{ proven: boolean; ended: number; caller: Caller | null }>> {
  const more = { bucket: shard.bucket, target: targetId };
  return onBucket(shard, async (db) => {
    const head = authenticated(db, token, true);
    const { read, logged } = await batchCompiled(db, {
      ...head.statements(),
      read: head.callerRow(name, shard.bucket),
      recorded: head.alsoRun(`${name}:recorded`, more, (t, _, P) =>
        recordEvents(db, type, ending(t, P("target")), t.writer, t.write),
      ),
      ended: head.alsoRun(`${name}:ended`, more, (t, _, P) => endSessions(db, ending(t, P("target")))),
      logged: head.also(`${name}:logged`, more, (t) => loggedBy(db, t.write)),
    });
    const { caller: found, move } = callerAndMove(read[0]);
    const events = head.events(logged);
    const ended = events.filter((event) => event.type === type).length;
    const answer = { proven: found !== null || ended > 0, ended, caller: found };
    return {
      answer: { answer, events, db },
      move,
      blocked: ended === 0 || found?.contextUnrecorded === true,
    };
  });
}

/** Deletes `targetId` if it is a live session of the caller's user; `proven` as for endForCaller. */
export async function deleteSession(
  shard: BucketShard,
  proof: TokenProof,
  targetId: string,
  writer: Writer,
  at: Instant,
  check: ContextCheck | null,
): Promise<Logged<{ proven: boolean; deleted: boolean; caller: Caller | null }>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  // The caller's own session: a user can always leave.
  const own: Ending = (t) => isProvenBy(t.proof, t.at);
  // Step-up never holds back support access either: the user ends someone else's access.
  const other: Ending = (t, target) => {
    const fresh = isFreshCaller(t.proof, t.at);
    return and(
      sql`${sessions.id} = ${target}`,
      isLiveSessionOfCaller(t.proof, t.at),
      isUsersOwn(t.proof),
      fresh && sql`(${fresh} OR ${sessions.supportAgent} IS NOT NULL)`,
    );
  };
  const ownOne = targetId === proof.id;
  const { answer, ...logged } = ownOne
    ? await endForCaller(shard, token, "deleted", "delete-own", own)
    : await endForCaller(shard, token, "deleted", "delete-other", other, targetId);
  return { answer: { proven: answer.proven, deleted: answer.ended > 0, caller: answer.caller }, ...logged };
}

/** Ends the token's own session; false when it was not live. */
export async function endSessionByToken(
  shard: BucketShard,
  proof: TokenProof,
  writer: Writer,
  at: Instant,
): Promise<Logged<boolean>> {
  return endedAny(await endMatching(shard, "logout", () => isProvenBy(proof, at), writer, at));
}

/** Ends every live session of the token's user; `proven` as for endForCaller. */
export async function endAllSessionsByToken(
  shard: BucketShard,
  proof: TokenProof,
  writer: Writer,
  at: Instant,
  check: ContextCheck | null,
): Promise<Logged<{ proven: boolean; ended: number; caller: Caller | null }>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  const all: Ending = (t) => and(isLiveSessionOfCaller(t.proof, t.at), isUsersOwn(t.proof));
  return endForCaller(shard, token, "logout_all", "logout-all", all);
}

/** Ends every live session of the token's user but the token's own; `proven` as for endForCaller. */
export async function endOtherSessionsByToken(
  shard: BucketShard,
  proof: TokenProof,
  writer: Writer,
  at: Instant,
  check: ContextCheck | null,
): Promise<Logged<{ proven: boolean; ended: number; caller: Caller | null }>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  const others: Ending = (t) =>
    and(
      isLiveSessionOfCaller(t.proof, t.at),
      sql`${sessions.id} <> ${t.proof.id}`,
      isUsersOwn(t.proof),
      isFreshCaller(t.proof, t.at),
    );
  return endForCaller(shard, token, "logout_others", "logout-others", others);
}

/**
 * Ends every live support session of `agentId` on one database (all users, all buckets), each
 * logged `ended` with the reason, in one batch. `moving`: how many more are in a bucket being
 * moved right now, which no write touches: ask again once the move is done.
 */
export async function endSupportSessionsOf(
  shard: Shard,
  agentId: string,
  reason: string,
  writer: Writer,
  at: Instant,
): Promise<Logged<{ ended: number; moving: number }>> {
  const write = newWrite(at.now);
  const { db } = shard;
  const ending = and(eq(sessions.supportAgent, agentId), isLive(at));
  const { logged, moving } = await batchNamed(db, {
    recorded: recordEvents(db, "ended", ending, writer, write, { reason }),
    ended: endSessions(db, ending),
    logged: loggedBy(db, write),
    moving: db
      .select({ count: sql<number>`count(*)`.mapWith(Number).as("count") })
      .from(sessions)
      .where(ending),
  });
  return { answer: { ended: logged.length, moving: moving[0]?.count ?? 0 }, events: logged, db };
}
