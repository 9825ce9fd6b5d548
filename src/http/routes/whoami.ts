import { type AuthFactor, isMaxAge } from "../../domain/auth-factors.ts";
import { type CallerView, callerView } from "../../domain/caller-view.ts";
import { isRefusal } from "../../domain/refusal.ts";
import type { SessionData } from "../../domain/session-data.ts";
import type { SupportActor } from "../../domain/support.ts";
import type { UpstreamSignInView } from "../../domain/upstream-sign-in.ts";
import { ownSession } from "../../services/own-sessions.ts";
import type { AppEnv } from "../app-env.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";
import { invalidMaxAge, refused } from "../refusals.ts";

/** Who the caller's session is, for a backend on any stack: GET /auth/whoami. */
export interface WhoamiView {
  session_id: string;
  user_id: string;
  expires_at: string;
  /** The latest proof of identity (the sign-in itself when the login flow gave no factors). */
  authenticated_at: string;
  /** RFC 8176 methods proved on this session, oldest proof first. */
  amr: AuthFactor[];
  /** NIST SP 800-63B AAL, when the login flow gave one. */
  assurance_level: number | null;
  device_bound: boolean;
  /** With `max_age`: `authenticated_at` is at most that many seconds ago; never for support access. */
  fresh?: boolean;
  /** Present only on support access: the agent acting on the user's behalf, and why. */
  actor?: SupportActor;
  /** Present only when the session has application data (src/domain/session-data.ts). */
  data?: SessionData;
  /** Present only when the login flow signed the user in through an upstream identity provider. */
  upstream?: UpstreamSignInView;
}

/**
 * The caller's view (src/domain/caller-view.ts) in the contract's names: the factors as RFC 8176
 * `amr`, `device_bound` always said. Never `reauthenticationRequired`: a held session is refused.
 */
export function whoamiView(view: CallerView): WhoamiView {
  return {
    session_id: view.sessionId,
    user_id: view.userId,
    expires_at: view.expiresAt,
    authenticated_at: view.authenticatedAt,
    amr: view.factors.map((proof) => proof.factor),
    assurance_level: view.assuranceLevel,
    device_bound: view.deviceBound === true,
    ...(view.fresh === undefined ? {} : { fresh: view.fresh }),
    ...(view.actor ? { actor: view.actor } : {}),
    ...(view.data ? { data: view.data } : {}),
    ...(view.upstream ? { upstream: view.upstream } : {}),
  };
}

/** `max_age` from the query: absent, or once, a whole number of seconds. */
function maxAgeOf(values: string[] | undefined): number | null {
  if (values === undefined) return null;
  const [value] = values;
  const seconds = values.length === 1 && value !== undefined && /^\d{1,10}$/.test(value) ? Number(value) : Number.NaN;
  if (!isMaxAge(seconds)) throw invalidMaxAge();
  return seconds;
}

// Named after what a backend asks (Ory Kratos' `/sessions/whoami`), apart from `/auth/sessions`,
// whose answer is the user's device list. A read: never cached (no-store under /auth/), so a
// revocation is seen by the very next call, and it writes only the activity every request by
// token records when due.
export const whoamiRoutes = new Hono<AppEnv>().get("/", requireToken, async (c) => {
  // Before the round trip: a query it would refuse costs the database nothing.
  const maxAge = maxAgeOf(c.req.queries("max_age"));
  const { scope, token } = c.var;
  const caller = await ownSession(scope, token);
  if (isRefusal(caller)) throw refused(c, caller);
  return c.json(whoamiView(callerView(caller, scope.at, maxAge)));
});
