import type { AuthFactor } from "../../domain/auth-factors.ts";
import { factorList, isMaxAge } from "../../domain/auth-factors.ts";
import { isRefusal } from "../../domain/refusal.ts";
import type { SessionData } from "../../domain/session-data.ts";
import { supportActor } from "../../domain/session-view.ts";
import type { SupportActor } from "../../domain/support.ts";
import { type UpstreamSignInView, upstreamSignInView } from "../../domain/upstream-sign-in.ts";
import { isFresh, ownSession } from "../../services/own-sessions.ts";
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
  const actor = supportActor(caller);
  const upstream = upstreamSignInView(caller);
  const view: WhoamiView = {
    session_id: caller.id,
    user_id: caller.userId,
    expires_at: caller.expiresAt.toISOString(),
    authenticated_at: caller.authenticatedAt.toISOString(),
    amr: factorList(caller.authProofs).map((proof) => proof.factor),
    assurance_level: caller.assuranceLevel,
    device_bound: caller.dbscKeyThumbprint !== null,
    ...(maxAge === null ? {} : { fresh: isFresh(caller, scope.at, maxAge) }),
    ...(actor ? { actor } : {}),
    ...(caller.data === null ? {} : { data: caller.data }),
    ...(upstream ? { upstream } : {}),
  };
  return c.json(view);
});
