import { type AccessTokenIssuer, signAccessToken } from "../domain/access-token.ts";
import { callerView } from "../domain/caller-view.ts";
import { isRefusal, type Refusal } from "../domain/refusal.ts";
import { ownSession } from "./own-sessions.ts";
import type { Scope } from "./scope.ts";
import type { SessionToken } from "./session-token.ts";

// Minting an access token (src/domain/access-token.ts) from a session's token: the session is
// proven in the one round trip every request by token makes, then the token is signed, in the
// worker. A held session gets none (it may only leave); support access gets one
// that names its agent (`act`), so a verifier can refuse what only the user may do.

/** A signed access token for the token's live session and its lifetime in seconds, or why none. */
export async function mintAccessToken(
  scope: Scope,
  token: SessionToken,
  issuer: AccessTokenIssuer,
): Promise<{ token: string; expiresIn: number } | Refusal> {
  const caller = await ownSession(scope, token);
  if (isRefusal(caller)) return caller;
  return signAccessToken(issuer, callerView(caller, scope.at), scope.at.now);
}
