import { type CompletedFactor, factorList, type StoredFactors } from "./auth-factors.ts";
import type { Instant } from "./clock.ts";
import type { SessionData } from "./session-data.ts";
import { supportActor } from "./session-view.ts";
import type { SupportActor } from "./support.ts";
import { type UpstreamSignInColumns, type UpstreamSignInView, upstreamSignInView } from "./upstreams/sign-in.ts";

// Who the caller's session is, read from its row in this one place: SessionService.authenticate
// answers the view as it is, GET /auth/whoami in the contract's snake_case
// (src/http/routes/whoami.ts), and an access token carries it as claims (./access-token.ts).

/** What is read of the caller's session, the one description of that row: src/db/liveness.ts `Caller` is this and a flag of the batch. */
export interface CallerColumns extends UpstreamSignInColumns {
  id: string;
  userId: string;
  expiresAt: Date;
  authenticatedAt: Date;
  authProofs: StoredFactors | null;
  assuranceLevel: number | null;
  /** Held by a context change: refused everything but its own logout until `reauthenticate`. */
  held: boolean;
  /** A support session's agent and reason (./support.ts); null on the user's own sessions. */
  supportAgent: string | null;
  supportReason: string | null;
  /** Set when the session is bound to its browser's key (DBSC): the key's RFC 7638 thumbprint. */
  dbscKeyThumbprint: string | null;
  /** Its application data (./session-data.ts); null: none. */
  data: SessionData | null;
  /** The organization it belongs to (./organizations/organization.ts); null: none. */
  organizationId: string | null;
}

export interface CallerView {
  sessionId: string;
  userId: string;
  expiresAt: string;
  /** The latest proof of identity (the sign-in itself when the login flow gave no factors). */
  authenticatedAt: string;
  /** The factors proved on this session, each with when, oldest first; [] when none were given. */
  factors: CompletedFactor[];
  /** NIST SP 800-63B AAL, when the login flow gave one. */
  assuranceLevel: number | null;
  /** The organization the session was created in, never changed; null: outside any. */
  organization: string | null;
  /** With `maxAge`: whether `authenticatedAt` is at most that many seconds ago; never for support access. */
  fresh?: boolean;
  /** Present (true) only when the session is bound to its browser's key (DBSC). */
  deviceBound?: true;
  /**
   * Present (true) only when the session was used from another device (or network, as
   * SESSION_CONTEXT_* say) than last seen, or its identity provider asked, and is held for
   * step-up: treat the request as not signed in, have the user prove who they are and call
   * `reauthenticate`, which lifts the hold (the provider's, only with its sign-in after it).
   */
  reauthenticationRequired?: true;
  /**
   * Present only on support access (RFC 8693's `act`): the agent acting on the user's behalf
   * and why. Show the agent a banner, and refuse what only the user may do.
   */
  actor?: SupportActor;
  /**
   * Present only when the session has application data (./session-data.ts): what the login
   * flow set at `create`, as `updateSessionData` last left it.
   */
  data?: SessionData;
  /** Present only when the login flow signed the user in through an upstream identity provider: which, its `sub` and `sid`. */
  upstream?: UpstreamSignInView;
}

/**
 * Whether the caller proved who they are at most `maxAgeSeconds` ago. Support access proves
 * nobody's identity: it is never a recent sign-in of the user.
 */
function isFresh(caller: CallerColumns, at: Instant, maxAgeSeconds: number): boolean {
  return caller.supportAgent === null && at.now.getTime() - caller.authenticatedAt.getTime() <= maxAgeSeconds * 1000;
}

/** The caller's view; `fresh` only when asked with a `maxAge` in seconds. */
export function callerView(caller: CallerColumns, at: Instant, maxAge: number | null = null): CallerView {
  const view: CallerView = {
    sessionId: caller.id,
    userId: caller.userId,
    expiresAt: caller.expiresAt.toISOString(),
    authenticatedAt: caller.authenticatedAt.toISOString(),
    factors: factorList(caller.authProofs),
    assuranceLevel: caller.assuranceLevel,
    organization: caller.organizationId,
  };
  const actor = supportActor(caller);
  const upstream = upstreamSignInView(caller);
  if (maxAge !== null) view.fresh = isFresh(caller, at, maxAge);
  if (caller.dbscKeyThumbprint !== null) view.deviceBound = true;
  if (caller.held) view.reauthenticationRequired = true;
  if (actor) view.actor = actor;
  if (caller.data !== null) view.data = caller.data;
  if (upstream) view.upstream = upstream;
  return view;
}
