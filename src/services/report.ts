import { confirmReport, type ReportedSession, type ReportProof, type ReportState, readReport } from "../db/report.ts";
import type { BucketShard } from "../db/shards.ts";
import { logLine } from "../domain/log.ts";
import { SERVICE_REASONS } from "../domain/reason.ts";
import { parseReportToken } from "../domain/token.ts";
import { type Scope, write } from "./scope.ts";

// "Was this you?": `create` gives a new device's sign-in a report token (src/domain/token.ts),
// which the product puts in its "new sign-in" message. With it alone, whoever reads the message
// sees what the sign-in was, and may end that one session. Reading changes nothing, so a mail
// scanner that fetches every link ends nothing; the token works once, for
// SESSION_REPORT_TTL_SECONDS. It proves only that its holder read the message, so it ends that
// one session and nothing else: the user's other sessions are theirs to end once signed in.

/**
 * Why a report token did nothing: `unknown` (malformed, or never issued), `used` (it ended its
 * session already), `expired` (issued more than SESSION_REPORT_TTL_SECONDS ago), or
 * `session_ended` (its session ended some other way: signed out, ended, expired).
 */
export type ReportRefusal = "unknown" | "used" | "expired" | "session_ended";

/** A report token's proof and the bucket and database its session id names; null: malformed. */
async function readReportToken(
  scope: Scope,
  token: string | undefined,
): Promise<{ proof: ReportProof; shard: BucketShard } | null> {
  const proof = token ? await parseReportToken(token) : null;
  const shard = proof && scope.shards.forSession(proof.id);
  return proof && shard ? { proof, shard } : null;
}

/** Tokens issued after this instant still work. */
function issuedAfter(scope: Scope): Date {
  return new Date(scope.at.now.getTime() - scope.config.reportTtlSeconds * 1000);
}

/** The sign-in, if the token may end it (the SQL's `reportable`), or why the token does nothing. */
function judged({ session, history }: ReportState, after: Date): ReportedSession | ReportRefusal {
  if (session?.reportable) return session;
  if (session) return session.createdAt <= session.issuedAfter ? "expired" : "session_ended";
  const created = history.find((event) => event.type === "created" && event.proves);
  if (!created) return "unknown";
  if (history.some((event) => event.type === "ended" && event.reason === SERVICE_REASONS.reportedByUser)) return "used";
  return created.createdAt <= after ? "expired" : "session_ended";
}

/** Each use's line: what was asked, what came of it, the session's public id; never the token. */
function logUse(action: "read" | "confirm", outcome: string, sessionId: string | null): void {
  logLine("info", "session_report", { action, outcome, sessionId });
}

/** What the token's sign-in was, if it can still be reported; changes nothing. */
export async function reportedSignIn(
  scope: Scope,
  token: string | undefined,
): Promise<ReportedSession | ReportRefusal> {
  const read = await readReportToken(scope, token);
  if (!read) {
    logUse("read", "unknown", null);
    return "unknown";
  }
  const answer = judged(await readReport(read.shard, read.proof, issuedAfter(scope), scope.at), issuedAfter(scope));
  logUse("read", typeof answer === "string" ? answer : "shown", read.proof.id);
  return answer;
}

/** Ends the token's session (`ended`, reason `reported_by_user`), or says why not. */
export async function endReportedSession(scope: Scope, token: string | undefined): Promise<"ended" | ReportRefusal> {
  const read = await readReportToken(scope, token);
  if (!read) {
    logUse("confirm", "unknown", null);
    return "unknown";
  }
  const after = issuedAfter(scope);
  const { ended, state } = await write(scope, null, (writer) =>
    confirmReport(read.shard, read.proof, after, writer, scope.at),
  );
  // A reportable state, read before the batch's ending, is the row that ending took (a
  // freeze that held it back answered BucketMoving).
  const judgement = ended ? "ended" : judged(state, after);
  const answer = typeof judgement === "string" ? judgement : "ended";
  logUse("confirm", answer, read.proof.id);
  return answer;
}
