import { and, eq, ne, type Placeholder, type SQL, sql } from "drizzle-orm";
import type { ClientContext } from "../domain/client-context.ts";
import type { Instant } from "../domain/clock.ts";
import type { EventType } from "../domain/events.ts";
import type { BackendSessionView, JsonText, SessionView } from "../domain/session-view.ts";
import {
  authenticated,
  type ByToken,
  callerAndMove,
  callerValue,
  type Head,
  type TokenOperation,
  tail,
  unrecordedOf,
} from "./authenticated.ts";
import { moveState, moveStateOf, onBucket } from "./buckets.ts";
import { batchNamed, type Database } from "./client.ts";
import { type ContextCheck, changeOf } from "./client-context.ts";
import { batchCompiled, compiled, compiledAll, placeholders, shaped } from "./compiled.ts";
import {
  type At,
  type Caller,
  inOrganization,
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
      read: head.callerRow(shard.bucket),
    });
    const { caller, move } = callerAndMove(read[0]);
    const answer = { answer: caller, events: head.events(contextEvents), db };
    return { answer, move, blocked: caller?.contextUnrecorded === true };
  });
}

/**
 * The list by token: an aggregate, exactly one row, so it carries the caller and the move state
 * too. Rendered once per shape, as the head is: it is most of a list's CPU otherwise.
 */
function sessionList(db: Database, { token: { proof, at, check } }: Head) {
  return db
    .select({
      list: sessionListJson(SESSION_VIEW).as("list"),
      caller: callerValue(proof, at, unrecordedOf(check)).as("caller"),
      move: moveState(sql.placeholder("bucket")).as("move"),
    })
    .from(sessions)
    .where(isLiveSessionOfCaller(proof, at));
}
const SESSION_LIST = compiled(sessionList);

/**
 * The caller (null when the token is not live) and its user's live sessions, newest first
 * (none when the caller is held), as the list shows them: one JSON value of one row
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
      listed: head.also(SESSION_LIST, { bucket: shard.bucket }),
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
 * What a backend's list is built on: the user, the instant, the bucket and, for a key limited
 * to one, the organization whose sessions alone it lists (null: every one).
 */
type UserList = {
  userId: string;
  at: Pick<At, "now" | "idleCutoff" | "slides">;
  bucket: string;
  organization: string | null;
};

/** A backend's list: one row, carrying the bucket's move state too. */
function userSessionList(db: Database, { userId, at, bucket, organization }: UserList) {
  return db
    .select({
      list: sessionListJson<BackendSessionView>(BACKEND_SESSION_VIEW).as("list"),
      move: moveState(bucket).as("move"),
    })
    .from(sessions)
    .where(and(eq(sessions.userId, userId), isLive(at), inOrganization(organization)));
}
const USER_SESSION_LIST = compiled(userSessionList);

/**
 * A user's live sessions in the list's order, for the rest of the system (no token, no touch):
 * one statement, its one row carrying the bucket's move state too, compiled as the statements
 * by token are (src/db/compiled.ts).
 */
export async function listSessionsByUserId(
  shard: BucketShard,
  userId: string,
  at: Instant,
  organization: string | null = null,
): Promise<JsonText<BackendSessionView[]>> {
  return onBucket(shard, async (db) => {
    // As the head's (src/db/authenticated.ts): each value a placeholder, the shape derived from them.
    const { values, value, instant } = placeholders();
    const once = shaped<UserList>({
      userId: value("userId", userId),
      at: {
        now: instant("now", at.now),
        idleCutoff: at.idleCutoff && instant("idleCutoff", at.idleCutoff),
        slides: at.slides,
      },
      bucket: value("bucket", shard.bucket),
      organization: organization === null ? null : value("organization", organization),
    });
    const called = { userId, at, bucket: shard.bucket, organization };
    const { listed } = await batchCompiled(db, {
      listed: compiledAll(db, { statement: USER_SESSION_LIST, once, values, called }),
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
  organization: string | null = null,
): Promise<Logged<number>> {
  const ending = and(
    eq(sessions.userId, userId),
    isLive(at),
    exceptSessionId === null ? undefined : ne(sessions.id, exceptSessionId),
    inOrganization(organization),
  );
  return endMatching(shard, "ended", () => ending, writer, at, { reason });
}

/**
 * Ends every live session of `userId` signed in through the upstream as the subject (of its
 * organization alone, for an organization's provider), logging `ended` with the reason and, as the event's context, each session's last seen and `cause`'s
 * (the sign-in that ended them).
 */
export async function endUpstreamSubjectSessions(
  shard: BucketShard,
  userId: string,
  signIn: { upstream: string; subject: string; organizationId: string | null },
  reason: string,
  writer: Writer,
  at: Instant,
  cause: ClientContext,
): Promise<Logged<number>> {
  const ending = and(
    eq(sessions.userId, userId),
    signIn.organizationId === null ? undefined : eq(sessions.organizationId, signIn.organizationId),
    eq(sessions.upstream, signIn.upstream),
    eq(sessions.upstreamSubject, signIn.subject),
    isLive(at),
  );
  return endMatching(shard, "ended", () => ending, writer, at, { reason, context: changeOf(cause) });
}

/** Ends one live session by id (no token), of `organization` when given, logging `ended` with the reason. */
export async function endSessionById(
  shard: BucketShard,
  sessionId: string,
  reason: string,
  writer: Writer,
  at: Instant,
  organization: string | null = null,
): Promise<Logged<boolean>> {
  const ending = and(eq(sessions.id, sessionId), isLive(at), inOrganization(organization));
  return endedAny(await endMatching(shard, "ended", () => ending, writer, at, { reason }));
}

/**
 * What an operation by token ends, logged as `type`: `matching`, built on the token it is given
 * (the head's placeholders), `target` a placeholder for a target id.
 */
interface Ending {
  type: EventType;
  matching: (token: TokenOperation, target: Placeholder) => SQL | undefined;
}

/**
 * The operations by token that end sessions, by name: the name is a constant of their
 * statements' input (`EndingInput`), so each is rendered once per ending and shape.
 */
const ENDINGS = {
  /** The caller's own session: a user can always leave. */
  deleteOwn: { type: "deleted", matching: (t) => isProvenBy(t.proof, t.at) },
  /** Another session of the caller's user: neither a hold nor step-up stops the user ending support access, someone else's. */
  deleteOther: {
    type: "deleted",
    matching: (t, target) => {
      const fresh = isFreshCaller(t.proof, t.at);
      return and(
        sql`${sessions.id} = ${target}`,
        isLiveSessionOfCaller(t.proof, t.at),
        isUsersOwn(t.proof),
        fresh && sql`(${fresh} OR ${sessions.supportAgent} IS NOT NULL)`,
      );
    },
  },
  /** Every live session of the caller's user. */
  logoutAll: {
    type: "logout_all",
    matching: (t) => and(isLiveSessionOfCaller(t.proof, t.at), isUsersOwn(t.proof)),
  },
  /** Every live session of the caller's user but the caller's own. */
  logoutOthers: {
    type: "logout_others",
    matching: (t) =>
      and(
        isLiveSessionOfCaller(t.proof, t.at),
        sql`${sessions.id} <> ${t.proof.id}`,
        isUsersOwn(t.proof),
        isFreshCaller(t.proof, t.at),
      ),
  },
} satisfies Record<string, Ending>;

/** An ending's statements are built on the head and the ending's name. */
type EndingInput = Head & { ending: keyof typeof ENDINGS };

function matchingOf({ token, ending }: EndingInput) {
  return ENDINGS[ending].matching(token, sql.placeholder("target"));
}

function recorded(db: Database, input: EndingInput) {
  const { token } = input;
  return recordEvents(db, ENDINGS[input.ending].type, matchingOf(input), token.writer, token.write);
}

function ended(db: Database, input: EndingInput) {
  return endSessions(db, matchingOf(input));
}

/** The events the batch's write logged, context events too. */
function loggedOf(db: Database, { token }: Head) {
  return loggedBy(db, token.write);
}

const ENDING = { recorded: compiled(recorded), ended: compiled(ended), logged: compiled(loggedOf) };

/** What ending sessions by token answers; `proven`: the token was live when the request ran. */
type EndedByToken = { proven: boolean; ended: number; caller: Caller | null };

/**
 * Ends the sessions `ending` matches, in a batch that first judges the caller's context, then
 * refreshes and reads the token's caller. `proven`: the token was live when the request ran (its
 * session may be among those ended, by this operation, not by the context check).
 */
function endForCaller(
  shard: BucketShard,
  { proof, at, check, writer }: Omit<ByToken, "write">,
  ending: keyof typeof ENDINGS,
  targetId: string | null = null,
): Promise<Logged<EndedByToken>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  const more = { bucket: shard.bucket, target: targetId };
  return onBucket(shard, async (db) => {
    const head = authenticated(db, token, true);
    const { read, logged } = await batchCompiled(db, {
      ...head.statements(),
      read: head.callerRow(shard.bucket),
      recorded: head.alsoRun(ENDING.recorded, more, { ending }),
      ended: head.alsoRun(ENDING.ended, more, { ending }),
      logged: head.also(ENDING.logged, more),
    });
    const { caller: found, move } = callerAndMove(read[0]);
    const events = head.events(logged);
    const ended = events.filter((event) => event.type === ENDINGS[ending].type).length;
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
  const call = { proof, at, check, writer };
  const { answer, ...logged } =
    targetId === proof.id
      ? await endForCaller(shard, call, "deleteOwn")
      : await endForCaller(shard, call, "deleteOther", targetId);
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

/** An operation by token ending what `ending` matches, as the routes call it. */
function endingByToken(ending: keyof typeof ENDINGS) {
  return (
    shard: BucketShard,
    proof: TokenProof,
    writer: Writer,
    at: Instant,
    check: ContextCheck | null,
  ): Promise<Logged<EndedByToken>> => endForCaller(shard, { proof, at, check, writer }, ending);
}

/** Ends every live session of the token's user; `proven` as for endForCaller. */
export const endAllSessionsByToken = endingByToken("logoutAll");

/** Ends every live session of the token's user but the token's own; `proven` as for endForCaller. */
export const endOtherSessionsByToken = endingByToken("logoutOthers");

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
