import { endSessionById, endSessionsByUserId, endSupportSessionsOf, listSessionsByUserId } from "../db/sessions.ts";
import { InvalidInput } from "../domain/invalid-input.ts";
import { isReason, isServiceReason, MAX_REASON_LENGTH } from "../domain/reason.ts";
import type { Sent } from "../domain/sent.ts";
import { type BackendSessionView, parsedText } from "../domain/session-view.ts";
import { placementOf } from "../domain/token.ts";
import { isUserId, USER_ID_RULE } from "../domain/user-id.ts";
import { checkUserId } from "./issue-session.ts";
import { type Scope, write } from "./scope.ts";

// Seeing and ending a user's sessions from the rest of the system, without a token: the one
// code path of SessionService.listUserSessions / endUserSessions / endSession and of the
// operator commands (`npm run session:list`, `session:end`). Each call is one D1 round trip.

/** The reasons the product is expected to give; any other short string is recorded as given. */
export const KNOWN_REASONS = ["password_changed", "account_disabled", "admin"] as const;
export type Reason = (typeof KNOWN_REASONS)[number] | (string & {});

export interface EndUserSessionsInput {
  userId: string;
  /** Stays signed in ("password changed, stay signed in here"). */
  exceptSessionId?: string | null;
  reason: Reason;
  /** The account's home region, as given to `create` (omitted: the default region). */
  region?: string | null;
}

export interface EndSessionInput {
  sessionId: string;
  reason: Reason;
}

export function checkReason(reason: unknown): string {
  if (!isReason(reason)) {
    throw new InvalidInput(
      `reason must be 1 to ${MAX_REASON_LENGTH} printable ASCII characters, not starting or ending with a space (e.g. ${KNOWN_REASONS.join(", ")})`,
    );
  }
  if (isServiceReason(reason)) throw new InvalidInput(`reason ${reason} is the service's own, never a caller's`);
  return reason;
}

function checkString(name: string, value: unknown): string {
  if (typeof value !== "string") throw new InvalidInput(`${name} must be a string`);
  return value;
}

/**
 * The user's live sessions as GET /auth/sessions shows them, with, for the backend asking, the
 * upstream sign-in of each that has one.
 */
export async function listUserSessions(
  { shards, at, reach }: Scope,
  userId: string,
  region?: string | null,
): Promise<BackendSessionView[]> {
  const shard = await shards.forUser(checkUserId(userId), region);
  // An object for the RPC to hand over: its one parse, where the HTTP list hands the text on.
  return parsedText(await listSessionsByUserId(shard, userId, at, reach));
}

/** Ends every live session of the user (but `exceptSessionId`); returns how many ended. */
export async function endUserSessions(scope: Scope, input: Sent<EndUserSessionsInput>): Promise<{ ended: number }> {
  const userId = checkUserId(input?.userId);
  const reason = checkReason(input.reason);
  // Strict: a token or a typo passed here by mistake would otherwise end the session it meant to keep.
  const except = input.exceptSessionId == null ? null : checkString("exceptSessionId", input.exceptSessionId);
  if (except !== null && !placementOf(except)) throw new InvalidInput("exceptSessionId must be a session id");
  const shard = await scope.shards.forUser(userId, input.region);
  const ended = await write(
    scope,
    null,
    (writer) => endSessionsByUserId(shard, userId, except, reason, writer, scope.at, scope.reach),
    null,
  );
  return { ended };
}

/** Ends one live session by its id (SessionService.endSession); `ended` is false when there was none. */
export async function endSession(scope: Scope, input: Sent<EndSessionInput>): Promise<{ ended: boolean }> {
  const sessionId = checkString("sessionId", input?.sessionId);
  const reason = checkReason(input.reason);
  // An id that cannot be a session of this deployment matches nothing: no lookup.
  const shard = scope.shards.forSession(sessionId);
  if (!shard) return { ended: false };
  const ended = await write(
    scope,
    null,
    (writer) => endSessionById(shard, sessionId, reason, writer, scope.at, scope.reach),
    null,
  );
  return { ended };
}

export interface EndSupportSessionsInput {
  /** The agent whose support access ends, for every user. */
  agentId: string;
  reason: Reason;
}

/**
 * Ends every open support session of an agent (the agent left), for every user: one round
 * trip per database. `moving`: how many sat in a bucket being moved and did not end yet; call
 * again after the move.
 */
export async function endSupportSessions(
  scope: Scope,
  input: Sent<EndSupportSessionsInput>,
): Promise<{ ended: number; moving: number }> {
  const agentId = input?.agentId;
  if (!isUserId(agentId)) throw new InvalidInput(`agentId must be a user id: ${USER_ID_RULE}`);
  const reason = checkReason(input.reason);
  const counts = await Promise.all(
    scope.shards
      .all()
      .map((shard) =>
        write(scope, null, (writer) => endSupportSessionsOf(shard, agentId, reason, writer, scope.at), null),
      ),
  );
  return counts.reduce((sum, { ended, moving }) => ({ ended: sum.ended + ended, moving: sum.moving + moving }), {
    ended: 0,
    moving: 0,
  });
}
