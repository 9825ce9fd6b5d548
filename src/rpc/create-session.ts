import type { Config } from "../domain/config.ts";
import { boundCookieName } from "../domain/cookie-header.ts";
import { registrationHeader } from "../domain/device-binding.ts";
import { sessionCookie } from "../http/cookie.ts";
import { type CreateSessionInput, issueSession } from "../services/issue-session.ts";
import type { Scope } from "../services/scope.ts";

/** What SessionService.create answers: the session, and what the login response carries. */
export interface CreatedSession {
  id: string;
  token: string;
  expiresAt: string;
  /** A ready `Set-Cookie` value for the login response. */
  cookie: string;
  /**
   * No session of this user seen within the events retention period (live or ended) had
   * the same browser family, OS and country: time for a "new sign-in" message.
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
}

/**
 * The login response's `Set-Cookie` for `token`, whose session has `seconds` to live. A
 * renewed session must not lose its cookie first: with a sliding lifetime the cookie lasts
 * as long as the session possibly can, and the database decides before that.
 */
export function loginCookie(config: Config, token: string, seconds: number): string {
  return sessionCookie(config.cookieName, token, config.slidingTtl ? config.maxLifetimeSeconds : seconds);
}

/** Issues a session (src/services/issue-session.ts) and answers as SessionService.create does. */
export async function createSession(scope: Scope, input: CreateSessionInput): Promise<CreatedSession> {
  const { config } = scope;
  const { id, token, expiresAt, expiresIn, newDevice, challenge, boundSecret } = await issueSession(scope, input);
  const created = { id, token, expiresAt, cookie: loginCookie(config, token, expiresIn) };
  if (!challenge || !boundSecret) return { ...created, newDevice };
  const boundCookie = sessionCookie(boundCookieName(config.cookieName), boundSecret, config.boundCookieSeconds);
  return { ...created, secureSessionRegistration: registrationHeader(challenge), boundCookie, newDevice };
}
