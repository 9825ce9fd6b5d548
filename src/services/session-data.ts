import { updateSessionData as updateRow } from "../db/session-data.ts";
import { InvalidInput } from "../domain/invalid-input.ts";
import type { Sent } from "../domain/sent.ts";
import {
  checkSessionData,
  checkSessionDataMode,
  MAX_SESSION_DATA_BYTES,
  type SessionData,
  type SessionDataMode,
} from "../domain/session-data.ts";
import type { Scope } from "./scope.ts";

// A session's application data (src/domain/session-data.ts) changed by its id, without its
// token: the one code path of SessionService.updateSessionData and of the admin API. One D1
// round trip, one row written; bad input is thrown before any.

export interface UpdateSessionDataInput {
  sessionId: string;
  /** The new data (`replace`) or an RFC 7396 merge patch (`merge`): a JSON object, as for `create`. */
  data: SessionData;
  /**
   * `replace` (the default): `data` becomes the session's data; `{}` clears it. `merge`:
   * `data` is merged in as an RFC 7396 JSON Merge Patch: each member replaces its key, a null
   * member deletes it, an object member merges into an object at that key, at every depth.
   */
  mode?: SessionDataMode;
}

/**
 * Replaces or patches the data of a live session. `updated: false` when no live session has
 * that id (ended, expired, idle, or never one), and nothing was written. A merge whose result
 * would exceed MAX_SESSION_DATA_BYTES is InvalidInput, and nothing is written.
 */
export async function updateSessionData(
  scope: Scope,
  input: Sent<UpdateSessionDataInput>,
): Promise<{ updated: boolean }> {
  if (typeof input?.sessionId !== "string") throw new InvalidInput("sessionId must be a string");
  const mode = checkSessionDataMode(input.mode);
  const { json } = checkSessionData(input.data);
  // An id that cannot be a session of this deployment matches nothing: no lookup.
  const shard = scope.shards.forSession(input.sessionId);
  if (!shard) return { updated: false };
  const result = await updateRow(shard, input.sessionId, mode, json, scope.at, scope.reach);
  if (!result.updated && result.tooLarge !== null)
    throw new InvalidInput(
      `data merged into the session's would be ${result.tooLarge} bytes of JSON, over ${MAX_SESSION_DATA_BYTES}: nothing was written`,
      RangeError,
      true,
    );
  return { updated: result.updated };
}
