import { listEvents } from "../db/events.ts";
import { type Caller, isStale } from "../db/liveness.ts";
import type { SessionEventRow } from "../db/schema.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  endSessionByToken,
  listSessionsByToken,
} from "../db/sessions.ts";
import { type SessionView, sessionView } from "../domain/session-view.ts";
import { contextCheck, type Scope, write } from "./scope.ts";
import type { SessionToken } from "./session-token.ts";

// What a signed-in user does with their own sessions, by the token of one of them: the
// operations of the HTTP API and SessionService.authenticate. Each is one D1 round trip, in which
// the token is proven live and the caller's context judged (src/db/client-context.ts); what a
// refusal means is the door's to say. A session held for step-up by a context change
// (`step_up`) does nothing but leave: its own logout, or deleting itself. So does a support
// session (`support`, src/domain/support.ts): it never ends the user's other sessions.

export type { Caller } from "../db/liveness.ts";

/** The token's live session (its activity recorded, its context judged), or null. */
export function authenticateToken(scope: Scope, { place, proof }: SessionToken): Promise<Caller | null> {
  return write(scope, proof.id, (actor) => authenticate(place, proof, scope.at, contextCheck(scope), actor));
}

/** The user's live sessions; null when the token is not live (its own session is always among them). */
export async function listOwnSessions(
  scope: Scope,
  { place, proof }: SessionToken,
): Promise<SessionView[] | null | "step_up"> {
  const { caller, sessions } = await write(scope, proof.id, (actor) =>
    listSessionsByToken(place, proof, scope.at, contextCheck(scope), actor),
  );
  if (!caller) return null;
  return caller.contextStepUp ? "step_up" : sessions.map(sessionView);
}

/** The user's security log, newest first; null when the token is not live. */
export async function listOwnEvents(
  scope: Scope,
  { place, proof }: SessionToken,
): Promise<SessionEventRow[] | null | "step_up"> {
  const { caller, events } = await write(scope, proof.id, (actor) =>
    listEvents(place, proof, scope.at, contextCheck(scope), actor),
  );
  if (!caller) return null;
  return caller.contextStepUp ? "step_up" : events;
}

export type DeleteOutcome = "deleted" | "invalid_token" | "id_required" | "not_authorized" | "step_up" | "support";

/** Ends the session `id` if it is a live one of the token's user (logged `deleted`). */
export async function deleteOwnSession(scope: Scope, token: SessionToken, id: string): Promise<DeleteOutcome> {
  const { shards, at } = scope;
  const { place, proof } = token;
  // A session of the caller's user lives in the caller's database, so an id naming another
  // one (or none) cannot be the caller's to delete: no other database is asked.
  if (id.trim() === "" || shards.forSession(id)?.binding !== place.binding) {
    // Nothing to delete, but authentication still comes first (the caller learns nothing).
    const caller = await authenticateToken(scope, token);
    if (!caller) return "invalid_token";
    if (caller.contextStepUp) return "step_up";
    if (id.trim() === "") return "id_required";
    return caller.supportAgent === null ? "not_authorized" : "support";
  }
  const { proven, deleted, caller } = await write(scope, proof.id, (actor) =>
    deleteSession(place, proof, id, actor, at, contextCheck(scope)),
  );
  if (!proven) return "invalid_token";
  if (deleted) return "deleted";
  if (caller?.supportAgent) return "support";
  return caller?.contextStepUp || isStale(caller, at) ? "step_up" : "not_authorized";
}

/** Ends the token's own session (logged `logout`); false when it was not live. Never judged: a user can always leave. */
export function endOwnSession(scope: Scope, { place, proof }: SessionToken): Promise<boolean> {
  return write(scope, proof.id, (actor) => endSessionByToken(place, proof, actor, scope.at));
}

/** Ends every live session of the token's user (logged `logout_all`): how many, or why none was. */
export async function endAllOwnSessions(
  scope: Scope,
  { place, proof }: SessionToken,
): Promise<number | "invalid_token" | "step_up" | "support"> {
  const { proven, ended, caller } = await write(scope, proof.id, (actor) =>
    endAllSessionsByToken(place, proof, actor, scope.at, contextCheck(scope)),
  );
  if (!proven) return "invalid_token";
  if (caller?.supportAgent) return "support";
  return caller?.contextStepUp ? "step_up" : ended;
}

/** Ends the user's other live sessions (logged `logout_others`): how many, or why none was. */
export async function endOtherOwnSessions(
  scope: Scope,
  { place, proof }: SessionToken,
): Promise<number | "invalid_token" | "step_up" | "support"> {
  const { proven, ended, caller } = await write(scope, proof.id, (actor) =>
    endOtherSessionsByToken(place, proof, actor, scope.at, contextCheck(scope)),
  );
  if (!proven) return "invalid_token";
  if (caller?.supportAgent) return "support";
  return caller?.contextStepUp || isStale(caller, scope.at) ? "step_up" : ended;
}
