import { getTableColumns, type Placeholder, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { ClientContext } from "../domain/client-context.ts";
import { forMember, type Instant } from "../domain/clock.ts";
import { facesOf } from "../domain/device.ts";
import { SERVICE_REASONS } from "../domain/reason.ts";
import { moveOf, moveState, moveStateOf, notMoving } from "./buckets.ts";
import { byNameDecoderOf, type Database, decoderOf } from "./client.ts";
import {
  acts,
  type CallerCheck,
  type ContextCheck,
  changedUnder,
  changedUnderOf,
  contextChange,
  differs,
  isBrowsers,
  isJudged,
  judgement as judgementOf,
  seenValues,
} from "./client-context.ts";
import {
  type Call,
  type Compiled,
  compiled,
  compiledAll,
  compiledRun,
  millis,
  placeholders,
  shaped,
} from "./compiled.ts";
import {
  ACTIVITY_WRITE_INTERVAL_MS,
  type At,
  type Caller,
  isProvenBy,
  ofOrganization,
  slidesOf,
  stepUpCutoffOf,
  type TokenProof,
} from "./liveness.ts";
import { organizationPolicies, type SessionEventRow, sessionEvents, sessions } from "./schema.ts";
import { endSessions, loggedBy, recordEvents, type Write, type Writer } from "./writes.ts";

// The one authenticated batch: every operation by a session's token (the list, the events, the
// deletes and logouts, authenticate, reauthenticate, a DBSC registration) starts its one batch
// with the head below, and reads the caller and the bucket's move state as columns of one row
// (`callerRow`, or a list's own aggregate); what it does in between is its own. The token is
// proven inside each statement. When nothing changed, which is almost every request, the check costs one statement (the
// event's INSERT, which then inserts nothing): the comparison rides in the UPDATE that records
// activity, and a call that cannot be judged (no context, a Bearer call, a policy that only
// allows) adds none.

/**
 * An operation by token as its statements read it: the token's proof, the call's instant and
 * context check, who acts, the write; each instant a `When` (src/db/compiled.ts).
 */
export interface TokenOperation {
  proof: TokenProof;
  at: At;
  check: CallerCheck | null;
  writer: Writer;
  write: Write;
}

/** An operation by token, as it is called: its instants are dates. */
export interface ByToken extends Omit<TokenOperation, "check"> {
  at: Instant;
  check: ContextCheck | null;
  write: Write & { at: Date };
}

/**
 * What every statement of an authenticated batch is built on (`authenticated`): the operation by
 * token, whether it records activity, and the instant recorded activity is stale before.
 */
export interface Head {
  token: TokenOperation;
  activity: boolean;
  staleBefore: number | Placeholder;
}

/**
 * With a sliding lifetime: now + the session's own TTL, never past creation + the maximum
 * lifetime, nor past the upstream's `session_expiry` when it gave one (a term of the same
 * UPDATE: a session without one pays nothing). A support session keeps the end it was opened with.
 * The caller's own row: a member's renews by its organization's policy as it is now (`memberRenewed`).
 */
function renewedExpiry(
  proof: Pick<TokenProof, "member">,
  at: At,
  maxLifetimeMs: unknown,
  upstreamEnd: unknown = sessions.upstreamExpiresAt,
): SQL<Date> {
  // A support session is never a member's (`openSupportSession` takes no organization).
  if (proof.member) return memberRenewed(at, maxLifetimeMs, upstreamEnd);
  const longest = sql`${sessions.createdAt} + ${maxLifetimeMs}`;
  return sql`CASE WHEN ${sessions.supportAgent} IS NULL THEN min(${millis(at.now)} + ${sessions.ttlSeconds} * 1000, ${longest}, coalesce(${upstreamEnd}, ${longest})) ELSE ${sessions.expiresAt} END`;
}

/**
 * A member's renewal: when its organization's policy slides (`slidesOf`), now + its lifetime (the
 * policy's, never longer than it was issued with), never past creation + the policy's maximum
 * lifetime (else the var's) nor the upstream's end; else its end as issued, never past the
 * upstream's end. No policy row: kept (it is not live).
 */
function memberRenewed(at: At, maxLifetimeMs: unknown, upstreamEnd: unknown): SQL<Date> {
  const now = millis(at.now);
  const p = organizationPolicies;
  const longest = sql`${sessions.createdAt} + coalesce(${p.maxLifetimeSeconds} * 1000, ${maxLifetimeMs})`;
  const ttl = sql`min(${sessions.ttlSeconds}, coalesce(${p.ttlSeconds}, ${sessions.ttlSeconds}))`;
  return sql<Date>`coalesce((SELECT CASE WHEN ${slidesOf(at)} THEN min(${now} + ${ttl} * 1000, ${longest}, coalesce(${upstreamEnd}, ${longest})) ELSE min(${sessions.createdAt} + ${sessions.ttlSeconds} * 1000, coalesce(${upstreamEnd}, ${longest})) END FROM ${ofOrganization}), ${sessions.expiresAt})`;
}

/** The instant a caller's statements are built on: a member's for what its organization's policy may do where no var does. */
export function callersInstant(proof: TokenProof, at: Instant): Instant {
  return proof.member ? forMember(at) : at;
}

/**
 * A session's end once the provider's fresh sign-in gave a new `session_expiry`: its own end
 * (renewed now with a sliding lifetime, else as issued), never past the new `session_expiry`.
 * A later one may thus give back what an earlier one took, never past the session's own end.
 */
export function reestablishedExpiry(proof: TokenProof, instant: Instant, upstreamEnd: Date): SQL<Date> {
  const at = callersInstant(proof, instant);
  const end = upstreamEnd.getTime();
  return at.slidingMaxLifetimeMs === null
    ? sql`min(${sessions.createdAt} + ${sessions.ttlSeconds} * 1000, ${end})`
    : renewedExpiry(proof, at, at.slidingMaxLifetimeMs, end);
}

/**
 * The head's statements as drizzle builds them, from what `authenticated` hands over: placeholders
 * for the call's values (src/db/compiled.ts), or the values themselves (`builders`).
 */
function build(db: Database, { token: { proof, at, check, writer, write }, activity, staleBefore }: Head) {
  const proven = isProvenBy(proof, at);
  const changed = check && sql`(${isBrowsers} AND ${differs(check)})`;
  const stale = activity ? sql`${sessions.lastActiveAt} <= ${staleBefore}` : null;
  const sliding = activity ? at.slidingMaxLifetimeMs : null;
  const judgement = check && judgementOf(check, at.now, proof.id, false);
  // What a change does is the row's own (its organization's policy, else the var's): the
  // statements are those the deployment's policies need, or a member's (`acts`), each deciding per row.
  const judges = check !== null && acts(check, "log", "hold", "end");
  const ending = check && changedUnder(check, "end");
  const contextInsert =
    check && judgement && judges
      ? recordEvents(
          db,
          sql`CASE WHEN ${ending} THEN 'ended' ELSE 'context_changed' END`,
          sql`${proven} AND ${isJudged} AND ${changedUnder(check, "log", "hold", "end")}`,
          writer,
          write,
          {
            // The policy that applied: a receiver is told of a held session (src/services/ssf/session-sets.ts).
            reason: sql<string>`CASE WHEN ${ending} THEN '${sql.raw(SERVICE_REASONS.contextChanged)}' WHEN ${changedUnder(check, "hold")} THEN 'hold' ELSE 'log' END`,
            context: contextChange(check),
          },
          judgementOf(check, at.now, proof.id, true),
        )
      : null;
  // RETURNING only when the rows go to the outbox: nothing else reads them, and the column list is
  // a third of what the statement compiles.
  const contextEvents = contextInsert && writer.published ? contextInsert.returning() : contextInsert;
  const contextEnded =
    check && judgement && acts(check, "end")
      ? endSessions(db, sql`${proven} AND ${isJudged} AND ${changedUnderOf(judgement, check, "end")}`)
      : null;
  // Travel is measured from the last use: a placed use refreshes a place time gone stale, even
  // when the activity was written since (a `both` session's Bearer calls, RPC without a context).
  const placeStale =
    check && check.context.latitude !== null
      ? sql`(${isBrowsers} AND ${sessions.seenPlaceAt} <= ${staleBefore})`
      : null;
  const reasons = [stale, changed, placeStale].filter((reason) => reason !== null);
  const due = reasons.length === 0 ? null : sql`(${sql.join(reasons, sql` OR `)})`;
  const update =
    due === null
      ? null
      : db
          .update(sessions)
          .set({
            ...(activity ? { lastActiveAt: sql`${millis(at.now)}` } : {}),
            ...(sliding === null ? {} : { expiresAt: renewedExpiry(proof, at, sliding) }),
            ...(check ? seenValues(check, at.now) : {}),
            // SET reads the row as it was: the change is judged against the context before this one.
            ...(check && judgement && judges
              ? {
                  held: sql`${sessions.held} OR (${isJudged} AND ${changedUnderOf(judgement, check, "hold")})`,
                }
              : {}),
          })
          .where(sql`${proven} AND ${due} AND ${notMoving()}`);
  return { contextEvents, contextEnded, activity: update };
}

// The head's statements one by one, each compiled (src/db/compiled.ts); which exist follows from the shape.
function contextEvents(db: Database, head: Head) {
  return build(db, head).contextEvents as SQLWrapper;
}
function contextEnded(db: Database, head: Head) {
  return build(db, head).contextEnded as SQLWrapper;
}
function activityUpdate(db: Database, head: Head) {
  return build(db, head).activity as SQLWrapper;
}
const HEAD = {
  contextEvents: compiled(contextEvents),
  contextEnded: compiled(contextEnded),
  activity: compiled(activityUpdate),
} satisfies Record<keyof ReturnType<typeof build>, Compiled<Head>>;

/**
 * As a column of a later read: a change of the caller's context is still not recorded
 * (`authenticated`); built on the head's placeholders or on the call's values.
 */
export function unrecordedOf(check: CallerCheck | null): SQL<number> {
  return check ? sql<number>`coalesce((${isBrowsers} AND ${differs(check)}), 0)` : sql<number>`0`;
}

/**
 * Exactly one row, whatever the tables hold: the caller and the bucket's move state
 * (`callerAndMove` decodes it), the bucket a placeholder (`authenticated(…).callerRow`).
 */
function callerRowOf(_db: Database, { token: { proof, at, check } }: Head): SQL {
  // A SELECT of no table: its one row needs none.
  return sql`SELECT ${callerValue(proof, at, unrecordedOf(check))} AS "caller", ${moveState(sql.placeholder("bucket"))} AS "move"`;
}
const CALLER_ROW = compiled(callerRowOf);

/** Every field of `T`, optional ones too: the placeholders built of it cover each field, a new one a type error until covered. */
type FieldByField<T> = { [K in keyof Required<T>]: T[K] };

/**
 * The statements that judge the caller's context and record its activity, in this order (each
 * null when it has nothing to do: which exist follows from the deployment's policies, what each
 * does from the session's own, its organization's where it sets them):
 *   - `contextEvents`: a change under `end` logs `ended` (reason `context_changed`), under `log`
 *     or `hold` `context_changed` (the policy as its reason); RETURNING them (`events`
 *     decodes them), for a read that reads no other event of its write;
 *   - `contextEnded`: a change under `end` ends the session;
 *   - `activity`: one UPDATE of the caller's row, when its activity is due (`activity`: every
 *     few minutes, renewing a sliding expiry), its context differs or its place's time is as
 *     old: records where and when a browser's cookie was used, and holds the session for a
 *     change under `hold`.
 * Compiled, rendered once per shape (src/db/compiled.ts): they are most of a request's CPU otherwise.
 * `unrecorded`, as a column of a later read: a change is still not recorded, which only a
 * frozen bucket makes so (its writes are held back); the operation must not answer as if it
 * were not there. Only a browser's session used through its cookie, or by an RPC caller that
 * passed its context, is judged: a Bearer call is an app's, from wherever it runs.
 */
export function authenticated(db: Database, token: ByToken, activity: boolean) {
  const { proof, writer, write } = token;
  const at = callersInstant(proof, token.at);
  const check = proof.carrier === "bearer" || token.check === null ? null : { ...token.check, member: proof.member };
  // Safari's two faces are constants of the SQL text (facesOf), its browser and OS with them.
  const apple = check !== null && facesOf(check.context).length > 1;
  // The placeholders: every value that changes per call a placeholder, its value this call's; what
  // changes the SQL text a constant (or null), which the shape is made of (below).
  const { values, value: param, instant: paramAt } = placeholders();
  const onPlaceholders: FieldByField<TokenOperation> = {
    proof: {
      id: param("id", proof.id),
      secretHash: param("secretHash", proof.secretHash),
      boundHash: proof.boundHash ? param("boundHash", proof.boundHash) : null,
      carrier: proof.carrier,
      member: proof.member,
    } satisfies FieldByField<TokenProof>,
    at: {
      now: paramAt("now", at.now),
      idleCutoff: at.idleCutoff && paramAt("idleCutoff", at.idleCutoff),
      slidingMaxLifetimeMs: at.slidingMaxLifetimeMs === null ? null : param("sliding", at.slidingMaxLifetimeMs),
      stepUpCutoff: at.stepUpCutoff && paramAt("stepUpCutoff", at.stepUpCutoff),
      slides: at.slides,
    } satisfies FieldByField<At>,
    check:
      check &&
      ({
        policies: check.policies,
        travel: check.travel,
        logOnly: check.logOnly,
        member: check.member,
        context: {
          browser: apple ? check.context.browser : param("browser", check.context.browser),
          os: apple ? check.context.os : param("os", check.context.os),
          country: check.context.country === null ? null : param("country", check.context.country),
          asn: check.context.asn === null ? null : param("asn", check.context.asn),
          latitude: check.context.latitude === null ? null : param("latitude", check.context.latitude),
          longitude: check.context.longitude === null ? null : param("longitude", check.context.longitude),
        } satisfies FieldByField<ClientContext>,
      } satisfies FieldByField<CallerCheck>),
    writer: {
      sessionId: param("writer", writer.sessionId),
      ipAddress: param("ip", writer.ipAddress),
      queued: writer.queued,
      published: writer.published,
      adminKeyId: param("adminKey", writer.adminKeyId),
    } satisfies FieldByField<Writer>,
    write: { id: param("writeId", write.id), at: paramAt("writeAt", write.at) } satisfies FieldByField<Write>,
  };
  const staleBefore = at.now.getTime() - ACTIVITY_WRITE_INTERVAL_MS;
  // Its shape, what changes the SQL text, derived from it (src/db/compiled.ts `shaped`) once for
  // every statement of the batch.
  const once = shaped<Head>({ token: onPlaceholders, activity, staleBefore: param("staleBefore", staleBefore) });
  // The same statements on the call's own values, for a fresh render to compare with (src/db/compiled.ts).
  const called: Head = { token: { proof, at, check, writer, write }, activity, staleBefore };
  const call = (statement: Compiled<Head>, more?: Record<string, unknown>): Call<Head> => ({
    statement,
    once,
    values: more ? { ...values, ...more } : values,
    called,
  });
  return {
    /**
     * The operation's own statement, compiled like the head's (src/db/compiled.ts): its builder
     * gets the placeholders, and may put a placeholder for each of `more`'s values (the bucket,
     * a target id). Rows come as D1 answers them, by column name: alias each column.
     */
    also: (statement: Compiled<Head>, more: Record<string, unknown>) => compiledAll(db, call(statement, more)),
    /**
     * The same, for a statement that answers nothing (INSERT, DELETE), built on the head and
     * `own`, constants of the operation that change its text: its shape is of both.
     */
    alsoRun: <O extends object>(statement: Compiled<Head & O>, more: Record<string, unknown>, own: O) =>
      compiledRun(db, {
        statement,
        once: shaped({ ...once.input, ...own }),
        values: { ...values, ...more },
        called: { ...called, ...own },
      }),
    /** The caller and the bucket's move state, in exactly one row (`callerRowOf`). */
    callerRow: (bucket: string) => compiledAll(db, call(CALLER_ROW, { bucket })),
    /** For D1's batch (src/db/compiled.ts `batchCompiled`); which exist follows from the shape, as in `build`. */
    statements: () => ({
      contextEvents: check && acts(check, "log", "hold", "end") ? compiledAll(db, call(HEAD.contextEvents)) : null,
      contextEnded: check && acts(check, "end") ? compiledRun(db, call(HEAD.contextEnded)) : null,
      activity: activity || check ? compiledRun(db, call(HEAD.activity)) : null,
    }),
    /**
     * The same statements as drizzle's builders, rendered on each call, for a batch of builders
     * (src/db/client.ts `batchNamed`): an operation that runs few times a session (a
     * re-authentication, a DBSC registration) and whose own statements are builders.
     */
    builders: () => build(db, called),
    /** The rows `contextEvents` returned, as the table's rows. */
    events: (rows: Record<string, unknown>[] | undefined): SessionEventRow[] => (rows ?? []).map(eventRow),
    /** For a builder's own statement, whether the context went unrecorded: built only when asked, as most requests never do. */
    unrecorded: () => unrecordedOf(check),
    /** For an operation whose own UPDATE of the caller's row records the context instead of `activity`. */
    seen: () => (check ? seenValues(check, at.now) : {}),
  };
}

/**
 * What is read of the caller: who, until when, how and when they last authenticated, held or
 * not, bound or not, its application data (src/domain/session-data.ts), its upstream sign-in and
 * its organization.
 */
export const CALLER = {
  id: sessions.id,
  userId: sessions.userId,
  expiresAt: sessions.expiresAt,
  authenticatedAt: sessions.authenticatedAt,
  authProofs: sessions.authProofs,
  assuranceLevel: sessions.assuranceLevel,
  held: sessions.held,
  supportAgent: sessions.supportAgent,
  supportReason: sessions.supportReason,
  dbscKeyThumbprint: sessions.dbscKeyThumbprint,
  data: sessions.data,
  upstream: sessions.upstream,
  upstreamSubject: sessions.upstreamSubject,
  upstreamSid: sessions.upstreamSid,
  upstreamExpiresAt: sessions.upstreamExpiresAt,
  organizationId: sessions.organizationId,
};

const CALLER_COUNT = Object.keys(CALLER).length;
const callerRow = decoderOf<Omit<Caller, "contextUnrecorded" | "stepUpCutoff">>(CALLER);
const eventRow = byNameDecoderOf<SessionEventRow>(getTableColumns(sessionEvents));

/**
 * The token's live session as the caller (null: the token proves none), as one value for a
 * column of another statement's row, read after the head of the batch (`unrecorded` from it).
 */
export function callerValue(proof: TokenProof, at: At, unrecorded: SQL<number>): SQL<Caller | null> {
  // Its step-up cutoff only where step-up is on: the value is otherwise null.
  const cutoff = stepUpCutoffOf(proof, at);
  const columns = sql.join([...Object.values(CALLER), ...(cutoff ? [cutoff] : []), unrecorded], sql`, `);
  return sql`(SELECT json_array(${columns}) FROM ${sessions} WHERE ${isProvenBy(proof, at)})`.mapWith(callerOf);
}

/** `callerValue`'s value as D1 answers it, decoded. */
export function callerOf(json: unknown): Caller | null {
  if (typeof json !== "string") return null;
  const values = JSON.parse(json) as unknown[];
  return {
    ...callerRow(values),
    contextUnrecorded: Boolean(values.at(-1)),
    stepUpCutoff: values.length > CALLER_COUNT + 1 ? (values[CALLER_COUNT] as number) : null,
  };
}

/** The caller (`callerValue`) and the move state (`moveState`) of a row that carries them by those names. */
export function callerAndMove(row: Record<string, unknown> | undefined) {
  return { caller: callerOf(row?.caller), move: moveStateOf(row?.move) };
}

/** The tail of every per-user batch that writes: this write's events, and the bucket's move state. */
export function tail(db: Database, write: Write, bucket: string) {
  return { logged: loggedBy(db, write), move: moveOf(db, bucket) };
}
