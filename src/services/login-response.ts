import { checkTokenCarrier } from "../domain/carrier.ts";
import type { ContextInput } from "../domain/client-context.ts";
import type { Config } from "../domain/config.ts";
import { boundCookieName, checkCookieHeader } from "../domain/cookie-header.ts";
import { registrationHeader } from "../domain/device-binding.ts";
import type { SupportRefusal } from "../domain/refusal.ts";
import type { Sent } from "../domain/sent.ts";
import {
  type CreateSessionInput,
  type IssuedSession,
  issueSession,
  type OpenSupportInput,
  openSupportSession,
  type ReauthenticateInput,
  reauthenticate,
} from "./issue-session.ts";
import type { Scope } from "./scope.ts";
import { sessionSetCookie } from "./session-cookie.ts";

// What a login flow is handed when the service issues or re-issues a session, by either entry point
// that can (the RPC and the admin API), each importing it from here rather than from the other:
// the session, its token and ready Set-Cookie values (./session-cookie.ts).

/** What SessionService.create answers: the session, and what the login response carries. */
export interface CreatedSession {
  id: string;
  token: string;
  expiresAt: string;
  /** A ready `Set-Cookie` value for the login response. */
  cookie: string;
  /**
   * No session of this user seen within the events retention period (live or ended) had
   * the same device (browser family and OS, Safari's two faces one) and country: time for a "new sign-in" message.
   */
  newDevice: boolean;
  /** With `deviceBound: true`: the login response's `Secure-Session-Registration` header value. */
  secureSessionRegistration?: string;
  /**
   * With `deviceBound: true`: a second ready `Set-Cookie` value, the first bound cookie. Until
   * the browser registers a key it is not needed; once it has, requests already under way at
   * that moment carry it, so none is refused while the browser finishes registering.
   */
  boundCookie?: string;
  /**
   * Only when `newDevice`: the report token (src/services/report.ts) for the "new sign-in"
   * message, whose link lets the user end this session with "this wasn't me". Never log it.
   */
  reportToken?: string;
}

/**
 * The login response's `Set-Cookie` for `session`'s token, which has `expiresIn` seconds to
 * live. A renewed session must not lose its cookie first: with a sliding lifetime (the vars', or
 * a member's organization's) the cookie lasts as long as the session possibly can, its maximum
 * lifetime or, when sooner, the provider's `session_expiry` (`upstreamExpiresIn` away), and the
 * database decides before that.
 */
export function loginCookie(
  config: Config,
  {
    token,
    expiresIn,
    upstreamExpiresIn,
    lifetime,
  }: Pick<IssuedSession, "token" | "expiresIn" | "upstreamExpiresIn" | "lifetime">,
): string {
  const furthest = Math.min(lifetime.maxLifetimeSeconds, upstreamExpiresIn ?? Number.POSITIVE_INFINITY);
  return sessionSetCookie(config.cookieName, token, lifetime.slidingTtl ? furthest : expiresIn);
}

/** Issues a session (./issue-session.ts) and answers as SessionService.create does. */
export async function createSession(scope: Scope, input: Sent<CreateSessionInput>): Promise<CreatedSession> {
  const { config } = scope;
  const issued = await issueSession(scope, input);
  const { id, token, expiresAt, newDevice, challenge, boundSecret, reportToken } = issued;
  const created = {
    id,
    token,
    expiresAt,
    cookie: loginCookie(config, issued),
    newDevice,
    ...(reportToken === undefined ? {} : { reportToken }),
  };
  if (!challenge || !boundSecret) return created;
  const boundCookie = sessionSetCookie(boundCookieName(config.cookieName), boundSecret, config.boundCookieSeconds);
  return { ...created, secureSessionRegistration: registrationHeader(challenge), boundCookie };
}

/** What SessionService.openSupportSession answers: the session and its token, as `create` does. */
export interface SupportSession {
  id: string;
  token: string;
  expiresAt: string;
  /** A ready `Set-Cookie` value, for a support tool that opens the product in the agent's browser. */
  cookie: string;
}

export interface ReauthenticateRequest extends ReauthenticateInput {
  /** The request's `Cookie` header: a device-bound session needs its bound cookie, as for `authenticate`. */
  cookie?: string;
  /** What carried the token, as for `authenticate`. */
  carrier?: "cookie" | "bearer";
  /** As for `authenticate`: recorded as where the session is now used (a change is logged, never refused). */
  context?: ContextInput;
}

export interface ReauthenticatedSession {
  /** The same session: the user's device list does not change. */
  sessionId: string;
  /** The new token; the old one is dead. */
  token: string;
  expiresAt: string;
  /** A ready `Set-Cookie` value carrying the new token. */
  cookie: string;
}

/** Opens support access (./issue-session.ts) and answers as SessionService.openSupportSession does. */
export async function supportSession(
  scope: Scope,
  input: Sent<OpenSupportInput>,
): Promise<SupportSession | SupportRefusal> {
  const opened = await openSupportSession(scope, input);
  if (typeof opened === "string") return opened;
  const { expiresIn, ...session } = opened;
  // Support access never slides: its cookie ends with it.
  return { ...session, cookie: sessionSetCookie(scope.config.cookieName, session.token, expiresIn) };
}

/**
 * Re-authenticates the token's session (./issue-session.ts) and answers as
 * SessionService.reauthenticate does; `scope` carries the request's context, checked by the entry point.
 */
export async function reauthenticated(
  scope: Scope,
  input: Sent<ReauthenticateRequest>,
): Promise<ReauthenticatedSession | null | "support"> {
  const cookie = checkCookieHeader(input?.cookie);
  const carrier = checkTokenCarrier(input?.carrier);
  const reissued = await reauthenticate(scope, input, carrier, cookie);
  if (!reissued || reissued === "support") return reissued;
  const { sessionId, token, expiresAt } = reissued;
  return { sessionId, token, expiresAt, cookie: loginCookie(scope.config, reissued) };
}
