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
import { type Scope, write } from "./scope.ts";
import type { SessionToken } from "./session-token.ts";

// What a signed-in user does with their own sessions, by the token of one of them: the
// operations of the HTTP API and SessionService.authenticate. Each is one D1 round trip, in which
// the token is proven live; what a refusal means is the door's to say.

export type { Caller } from "../db/liveness.ts";

/** The token's live session (its activity recorded), or null. */
export function authenticateToken({ at }: Scope, { place, proof }: SessionToken): Promise<Caller | null> {
  return authenticate(place, proof, at);
}

/** The user's live sessions; null when the token is not live (its own session is always among them). */
export async function listOwnSessions({ at }: Scope, { place, proof }: SessionToken): Promise<SessionView[] | null> {
  const rows = await listSessionsByToken(place, proof, at);
  return rows.length === 0 ? null : rows.map(sessionView);
}

/** The user's security log, newest first; null when the token is not live. */
export async function listOwnEvents({ at }: Scope, { place, proof }: SessionToken): Promise<SessionEventRow[] | null> {
  const { caller, events } = await listEvents(place, proof, at);
  return caller ? events : null;
}

export type DeleteOutcome = "deleted" | "invalid_token" | "id_required" | "not_authorized" | "step_up";

/** Ends the session `id` if it is a live one of the token's user (logged `deleted`). */
export async function deleteOwnSession(
  scope: Scope,
  { place, proof }: SessionToken,
  id: string,
): Promise<DeleteOutcome> {
  const { shards, at } = scope;
  // A session of the caller's user lives in the caller's database, so an id naming another
  // one (or none) cannot be the caller's to delete: no other database is asked.
  if (id.trim() === "" || shards.forSession(id)?.binding !== place.binding) {
    // Nothing to delete, but authentication still comes first (the caller learns nothing).
    if (!(await authenticate(place, proof, at))) return "invalid_token";
    return id.trim() === "" ? "id_required" : "not_authorized";
  }
  const { proven, deleted, caller } = await write(scope, proof.id, (actor) =>
    deleteSession(place, proof, id, actor, at),
  );
  if (!proven) return "invalid_token";
  if (deleted) return "deleted";
  return id !== proof.id && isStale(caller, at) ? "step_up" : "not_authorized";
}

/** Ends the token's own session (logged `logout`); false when it was not live. */
export function endOwnSession(scope: Scope, { place, proof }: SessionToken): Promise<boolean> {
  return write(scope, proof.id, (actor) => endSessionByToken(place, proof, actor, scope.at));
}

/** Ends every live session of the token's user (logged `logout_all`); 0 when the token was not live. */
export function endAllOwnSessions(scope: Scope, { place, proof }: SessionToken): Promise<number> {
  return write(scope, proof.id, (actor) => endAllSessionsByToken(place, proof, actor, scope.at));
}

/** Ends the user's other live sessions (logged `logout_others`): how many, or why none was. */
export async function endOtherOwnSessions(
  scope: Scope,
  { place, proof }: SessionToken,
): Promise<number | "invalid_token" | "step_up"> {
  const { proven, ended, caller } = await write(scope, proof.id, (actor) =>
    endOtherSessionsByToken(place, proof, actor, scope.at),
  );
  if (!proven) return "invalid_token";
  return isStale(caller, scope.at) ? "step_up" : ended;
}
