import { InvalidInput } from "./invalid-input.ts";
import { isUserId, USER_ID_RULE } from "./user-id.ts";

// Support access: a session opened on a user's behalf by a support agent (RFC 8693's actor),
// with a reason, time-boxed by SESSION_SUPPORT_MAX_SECONDS, shown to the user in their list
// and log, and theirs to end. It may not end the user's other sessions, be re-authenticated
// or renewed, or bind a device key (src/db/liveness.ts `isUsersOwn`).

/** Open support sessions a user may have at once: one per ticket being worked, and a spare. */
export const SUPPORT_SESSIONS_PER_USER = 3;

/** The reason (a ticket reference or a sentence) is shown to the user as given, up to this length. */
export const MAX_SUPPORT_REASON_LENGTH = 200;

/** Who acts in a support session, and why: the `actor` of its listing and of `authenticate`. */
export interface SupportActor {
  /** The agent's user id (RFC 8693 `act.sub`). */
  sub: string;
  reason: string;
}

/** The agent and the reason of a support session's input, checked; InvalidInput names the rule broken. */
export function checkSupport(userId: string, agentId: unknown, reason: unknown): SupportActor {
  if (!isUserId(agentId)) throw new InvalidInput(`agentId must be ${USER_ID_RULE}`);
  if (agentId === userId) throw new InvalidInput("agentId must not be the user: support access is by someone else");
  if (
    typeof reason !== "string" ||
    reason.trim() === "" ||
    reason.length > MAX_SUPPORT_REASON_LENGTH ||
    /[\p{Cc}\p{Cf}]/u.test(reason)
  )
    throw new InvalidInput(
      `reason is required: a ticket or a sentence of at most ${MAX_SUPPORT_REASON_LENGTH} characters, without control or format characters`,
    );
  return { sub: agentId, reason };
}
