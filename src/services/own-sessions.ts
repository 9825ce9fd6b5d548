import { listEvents } from "../db/events.ts";
import { type Caller, staleSignIn } from "../db/liveness.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  endSessionByToken,
  listSessionsByToken,
} from "../db/sessions.ts";
import type { EventView } from "../domain/event-view.ts";
import type { Refusal } from "../domain/refusal.ts";
import type { JsonText, SessionView } from "../domain/session-view.ts";
import { contextCheck, type Scope, write } from "./scope.ts";
import type { SessionToken } from "./session-token.ts";

// What a signed-in user does with their own sessions, by the token of one of them: the
// operations of the HTTP API and SessionService.authenticate. Each is one D1 round trip, in which
// the token is proven live and the caller's context judged (src/db/client-context.ts); a refusal
// is one of src/domain/refusal.ts, and what it means is the entry point's to say. A held session
// (refused with `step-up`) does nothing but leave: its own logout, or deleting
// itself. A support session (`support`, src/domain/support.ts) never ends the user's others.

export type { Caller } from "../db/liveness.ts";

/** The token's live session (its activity recorded, its context judged), or null. */
export function authenticateToken(scope: Scope, { shard, proof }: SessionToken): Promise<Caller | null> {
  return write(scope, proof.id, (writer) => authenticate(shard, proof, scope.at, contextCheck(scope), writer));
}

/** The user's live sessions (the caller's own always among them), or why none are listed. */
export async function listOwnSessions(
  scope: Scope,
  { shard, proof }: SessionToken,
): Promise<JsonText<SessionView[]> | Refusal> {
  const { caller, sessions } = await write(scope, proof.id, (writer) =>
    listSessionsByToken(shard, proof, scope.at, contextCheck(scope), writer),
  );
  if (!caller) return "not_live";
  return caller.held ? "step-up" : sessions;
}

/** The token's session if it is live and free to act (its activity recorded, its context judged), or why not. */
export async function ownSession(scope: Scope, token: SessionToken): Promise<Caller | Refusal> {
  const caller = await authenticateToken(scope, token);
  if (!caller) return "not_live";
  return caller.held ? "step-up" : caller;
}

/** The user's security log, newest first, or why it is not given. */
export async function listOwnEvents(
  scope: Scope,
  { shard, proof }: SessionToken,
): Promise<JsonText<EventView[]> | Refusal> {
  const { caller, events } = await write(scope, proof.id, (writer) =>
    listEvents(shard, proof, scope.at, contextCheck(scope), writer),
  );
  if (!caller) return "not_live";
  return caller.held ? "step-up" : events;
}

/** Ends the session `id` if it is a live one of the token's user (logged `deleted`), or why not. */
export async function deleteOwnSession(scope: Scope, token: SessionToken, id: string): Promise<"deleted" | Refusal> {
  const { shards, at } = scope;
  const { shard, proof } = token;
  // A session of the caller's user lives in the caller's database, so an id naming another
  // one (or none) cannot be the caller's to delete: no other database is asked.
  if (id.trim() === "" || shards.forSession(id)?.binding !== shard.binding) {
    // Nothing to delete, but authentication still comes first (the caller learns nothing).
    const caller = await authenticateToken(scope, token);
    if (!caller) return "not_live";
    if (caller.held) return "step-up";
    if (id.trim() === "") return "id_required";
    return caller.supportAgent === null ? "not_yours" : "support";
  }
  const { proven, deleted, caller } = await write(scope, proof.id, (writer) =>
    deleteSession(shard, proof, id, writer, at, contextCheck(scope)),
  );
  if (!proven) return "not_live";
  if (deleted) return "deleted";
  if (caller?.supportAgent) return "support";
  return caller?.held ? "step-up" : (staleSignIn(caller, at.now) ?? "not_yours");
}

/** Ends the token's own session (logged `logout`). Never judged: a user can always leave. */
export async function endOwnSession(scope: Scope, { shard, proof }: SessionToken): Promise<"ended" | "not_live"> {
  const ended = await write(scope, proof.id, (writer) => endSessionByToken(shard, proof, writer, scope.at));
  return ended ? "ended" : "not_live";
}

/** Ends every live session of the token's user (logged `logout_all`): how many, or why none was. */
export async function endAllOwnSessions(scope: Scope, { shard, proof }: SessionToken): Promise<number | Refusal> {
  const { proven, ended, caller } = await write(scope, proof.id, (writer) =>
    endAllSessionsByToken(shard, proof, writer, scope.at, contextCheck(scope)),
  );
  if (!proven) return "not_live";
  if (caller?.supportAgent) return "support";
  return caller?.held ? "step-up" : ended;
}

/** Ends the user's other live sessions (logged `logout_others`): how many, or why none was. */
export async function endOtherOwnSessions(scope: Scope, { shard, proof }: SessionToken): Promise<number | Refusal> {
  const { proven, ended, caller } = await write(scope, proof.id, (writer) =>
    endOtherSessionsByToken(shard, proof, writer, scope.at, contextCheck(scope)),
  );
  if (!proven) return "not_live";
  if (caller?.supportAgent) return "support";
  return caller?.held ? "step-up" : (staleSignIn(caller, scope.at.now) ?? ended);
}
