import { and, notExists, type SQL, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import type { Instant } from "../domain/clock.ts";
import { SERVICE_REASONS } from "../domain/reason.ts";
import type { SessionView } from "../domain/session-view.ts";
import { tail } from "./authenticated.ts";
import { moveOf, onBucket } from "./buckets.ts";
import { batchNamed, type Database } from "./client.ts";
import { isLive, ofOrganization } from "./liveness.ts";
import { organizationPolicies, type SessionEventRow, sessionEvents, sessions } from "./schema.ts";
import { SESSION_VIEW } from "./session-view.ts";
import type { BucketShard } from "./shards.ts";
import { endSessions, type Logged, loggedBy, newWrite, recordEvents, type Write, type Writer } from "./writes.ts";

// A new device's report token (src/services/report.ts), read and confirmed: one batch each.
// While the session's row is there the token is proven against it; once it is gone (ended),
// against the hash its `created` event kept, whose session's later events say how it ended.

/** A well-formed report token, reduced to what is compared with the table. */
export interface ReportProof {
  id: string;
  secretHash: string;
}

/** What a report shows of its sign-in, while its row is there: the session as the list shows it. */
const REPORTED = {
  view: sql`json(${SESSION_VIEW})`.mapWith((json: string) => JSON.parse(json) as SessionView),
  createdAt: sessions.createdAt,
};

/** The token's sign-in as its row says, or, the row gone, its session's events. */
export interface ReportState {
  session: ReportedSession | null;
  history: ReportHistory[];
}

/** `reportable`: the token may end it now (`isReportable`, the ending's own condition); `issuedAfter`: its cutoff. */
export type ReportedSession = { view: SessionView; createdAt: Date; reportable: boolean; issuedAfter: Date };

export type ReportHistory = Pick<SessionEventRow, "type" | "reason" | "createdAt"> & {
  /** A `created` event that kept this token's hash: the token was issued. */
  proves: boolean;
};

function isReportOf(proof: ReportProof): SQL {
  return sql`(${sessions.id} = ${proof.id} AND ${sessions.reportHash} = ${proof.secretHash})`;
}

/**
 * The instant the row's token must be issued after: `issuedAfter` (SESSION_REPORT_TTL_SECONDS
 * ago), or for a member's session its organization's report link lifetime ago, when it sets one.
 */
function reportCutoff(at: Instant, issuedAfter: Date): SQL<number> {
  const after = issuedAfter.getTime();
  return sql<number>`CASE WHEN ${sessions.organizationId} IS NULL THEN ${after} ELSE coalesce((SELECT ${at.now.getTime()} - ${organizationPolicies.reportTtlSeconds} * 1000 FROM ${ofOrganization}), ${after}) END`;
}

/** The one rule for "the token may end this row": its own, live, the token issued after its cutoff. */
function isReportable(proof: ReportProof, at: Instant, issuedAfter: Date): SQL {
  return sql`(${isReportOf(proof)} AND ${isLive(at)} AND ${sessions.createdAt} > ${reportCutoff(at, issuedAfter)})`;
}

/**
 * The state's two statements. `write`: a confirmation's, whose own ending makes reading the
 * events needless. The events are read only when the row is gone, never by the bucket alone
 * (the user is not known without the row; a forged id would read every user's events): the
 * token's `created` event by the partial report index, then that user's events since, of this
 * session, by the main index. So the rows read are that one user's, however full the bucket.
 */
function stateOf(
  db: Database,
  shard: BucketShard,
  proof: ReportProof,
  at: Instant,
  issuedAfter: Date,
  write: Write | null,
) {
  const created = alias(sessionEvents, "created");
  return {
    session: db
      .select({
        ...REPORTED,
        reportable: sql<boolean>`${isReportable(proof, at, issuedAfter)}`.mapWith(Boolean),
        issuedAfter: reportCutoff(at, issuedAfter).mapWith((ms: number) => new Date(ms)),
      })
      .from(sessions)
      .where(isReportOf(proof)),
    history: db
      .select({
        type: sessionEvents.type,
        reason: sessionEvents.reason,
        createdAt: sessionEvents.createdAt,
        proves: sql<boolean>`coalesce(${sessionEvents.reportHash} = ${proof.secretHash}, 0)`.mapWith(Boolean),
      })
      .from(created)
      .innerJoin(
        sessionEvents,
        sql`${sessionEvents.bucket} = ${shard.bucket} AND ${sessionEvents.userId} = ${created.userId} AND ${sessionEvents.createdAt} >= ${created.createdAt} AND ${sessionEvents.sessionId} = ${created.sessionId}`,
      )
      .where(
        and(
          notExists(db.select({ one: sql`1` }).from(sessions).where(isReportOf(proof))),
          write ? notExists(loggedBy(db, write)) : undefined,
          sql`${created.sessionId} = ${proof.id} AND ${created.reportHash} IS NOT NULL`,
        ),
      ),
  };
}

/** What the token's sign-in is now; changes nothing. */
export function readReport(
  shard: BucketShard,
  proof: ReportProof,
  issuedAfter: Date,
  at: Instant,
): Promise<ReportState> {
  return onBucket(shard, async (db) => {
    const { session, history, move } = await batchNamed(db, {
      ...stateOf(db, shard, proof, at, issuedAfter, null),
      move: moveOf(db, shard.bucket),
    });
    return { answer: { session: session[0] ?? null, history }, move: move[0], blocked: false };
  });
}

/**
 * Ends the token's session if it is reportable, logged `ended` (`reported_by_user`), in one
 * batch, whose state is read before the ending: a reportable row is the one the ending takes,
 * in the same transaction. `ended` is read from this write's events, so a replay (the row gone)
 * answers what the first attempt did.
 */
export function confirmReport(
  shard: BucketShard,
  proof: ReportProof,
  issuedAfter: Date,
  writer: Writer,
  at: Instant,
): Promise<Logged<{ ended: boolean; state: ReportState }>> {
  const write = newWrite(at.now);
  const ending = isReportable(proof, at, issuedAfter);
  return onBucket(shard, async (db) => {
    const { session, history, logged, move } = await batchNamed(db, {
      ...stateOf(db, shard, proof, at, issuedAfter, write),
      recorded: recordEvents(db, "ended", ending, writer, write, { reason: SERVICE_REASONS.reportedByUser }),
      ended: endSessions(db, ending),
      ...tail(db, write, shard.bucket),
    });
    const ended = logged.length > 0;
    const answer = { ended, state: { session: session[0] ?? null, history } };
    // Only a reportable row the freeze kept from ending waits for the move; a refusal stands.
    return {
      answer: { answer, events: logged, db },
      move: move[0],
      blocked: !ended && session[0]?.reportable === true,
    };
  });
}
