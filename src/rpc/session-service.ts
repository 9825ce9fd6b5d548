import { WorkerEntrypoint } from "cloudflare:workers";
import { isMaxAge } from "../domain/auth-factors.ts";
import { type CallerView, callerView } from "../domain/caller-view.ts";
import { checkTokenCarrier } from "../domain/carrier.ts";
import { type ClientContext, type ContextInput, checkContextInput } from "../domain/client-context.ts";
import { ConfigError } from "../domain/config.ts";
import { checkCookieHeader } from "../domain/cookie-header.ts";
import { BucketMoving, DatabaseUnavailable } from "../domain/errors.ts";
import { InvalidInput } from "../domain/invalid-input.ts";
import { type CallRefusal, callRefusalSentence, isCallRefusal } from "../domain/refusal.ts";
import type { BackendSessionView } from "../domain/session-view.ts";
import {
  type CreatedSession,
  createSession,
  type ReauthenticatedSession,
  type ReauthenticateRequest,
  reauthenticated,
  type SupportSession,
  supportSession,
} from "../services/login-response.ts";

export type { CreatedSession, ReauthenticatedSession, ReauthenticateRequest, SupportSession };

import { logFailure } from "../services/failure-log.ts";
import type { CreateSessionInput, OpenSupportInput } from "../services/issue-session.ts";
import {
  type EndedAnswer,
  endOrganizationSessions,
  type HeldAnswer,
  holdOrganizationSessions,
  type ListOrganizationSessionsInput,
  listOrganizationSessions,
  type OrganizationSessionsInput,
  type OrganizationSessionsPage,
} from "../services/organizations/sessions.ts";
import { authenticateToken } from "../services/own-sessions.ts";
import { judgingInput, openScope, type Scope } from "../services/scope.ts";
import { type UpdateSessionDataInput, updateSessionData } from "../services/session-data.ts";
import { readSessionToken } from "../services/session-token.ts";
import {
  type EndSessionInput,
  type EndSupportSessionsInput,
  type EndUserSessionsInput,
  endSession,
  endSupportSessions,
  endUserSessions,
  listUserSessions,
} from "../services/user-sessions.ts";

/** What `authenticate` answers for a live session: the caller's view (src/domain/caller-view.ts). */
export type AuthenticatedSession = CallerView;

export interface AuthenticateOptions {
  /** Seconds: adds `fresh` to the answer. */
  maxAge?: number;
  /**
   * The request's `Cookie` header. A device-bound session authenticates only with its live
   * bound cookie beside the token, so pass it whenever the token came from a browser.
   */
  cookie?: string;
  /**
   * What carried the token to you: `cookie` (the session cookie) or `bearer` (an
   * `Authorization: Bearer` header). A session issued with `carrier: "cookie"` is refused as
   * `bearer`, one issued with `carrier: "bearer"` as `cookie`, and a `bearer` call is never
   * judged by its context. Omitted: any session is accepted.
   */
  carrier?: "cookie" | "bearer";
  /**
   * Where the browser's request comes from: its `User-Agent` header and `request.cf.country`,
   * `.asn`, `.latitude` and `.longitude`. Judged against where a browser's session (issued with `carrier`
   * `cookie` or `both`) was last used (docs/integrating.md, "Session context"); omitted: not judged.
   */
  context?: ContextInput;
}

function checkMaxAge(options: AuthenticateOptions | undefined): number | null {
  const maxAge = options?.maxAge;
  if (maxAge === undefined) return null;
  if (!isMaxAge(maxAge)) throw new InvalidInput("maxAge must be a whole number of seconds", RangeError);
  return maxAge;
}

/**
 * What an RPC caller gets for a failure of the service's own (a bug, a database error it does
 * not retry): no internal message, only the id of the log line that has it.
 */
export class InternalError extends Error {
  override name = "InternalError";
  constructor(requestId: string) {
    super(`The session service failed; its log line has request_id ${requestId}.`);
  }
}

/**
 * Issuing, checking, listing and ending sessions for the rest of the system (the login
 * worker, other APIs, support tools) over a service binding; deliberately not reachable
 * over HTTP. Each method is one D1 round trip; bad input is thrown as a TypeError or
 * RangeError before any. Every method is async, so even a refused configuration reaches the
 * caller as a rejected promise, not a synchronous throw.
 */
export class SessionService extends WorkerEntrypoint<Env> {
  // A call's scope (src/services/scope.ts). A method, not a field: a refused SHARDS then
  // rejects the call like any error, not the constructor.
  private scope(context: ClientContext | null = null): Scope {
    return openScope(this.env, { waitUntil: (promise) => this.ctx.waitUntil(promise), context });
  }

  /**
   * Runs one method on its scope (opened with `context`, checked first), the one place the RPC
   * turns a service's answer into its error: invalid input raised before the call asked a
   * database (`judgingInput`) into the TypeError or RangeError it names, a call refusal into a
   * RangeError with its sentence. Anything else is a failure: its one log line, as over HTTP
   * (src/services/failure-log.ts); a failure to retry or a refused configuration is thrown as
   * it is (their messages are fixed, or name only the var), any other as an InternalError.
   */
  private async run<T>(
    rpc: string,
    call: (scope: Scope) => Promise<T | CallRefusal>,
    context: () => ClientContext | null = () => null,
  ): Promise<T> {
    let result: T | CallRefusal;
    try {
      result = await judgingInput(this.scope(context()), call);
    } catch (error) {
      if (error instanceof InvalidInput) throw new error.thrownAs(error.message);
      const requestId = crypto.randomUUID();
      logFailure(error, { rpc }, requestId);
      if (error instanceof BucketMoving || error instanceof DatabaseUnavailable || error instanceof ConfigError)
        throw error;
      throw new InternalError(requestId);
    }
    if (isCallRefusal(result)) throw new RangeError(callRefusalSentence(result));
    return result;
  }

  async create(input: CreateSessionInput): Promise<CreatedSession> {
    return this.run("create", (scope) => createSession(scope, input));
  }

  /**
   * Opens support access to a user's account for an agent (src/domain/support.ts): a session
   * the user sees in their list and log, with the agent and the reason, ending at most
   * SESSION_SUPPORT_MAX_SECONDS from now and never later. End it early with `endSession`.
   * Bad input is a TypeError; an unknown user, too many open or too long a ttl a RangeError.
   */
  async openSupportSession(input: OpenSupportInput): Promise<SupportSession> {
    return this.run("openSupportSession", (scope) => supportSession(scope, input));
  }

  /** Also records the session's activity (and renews it, with a sliding lifetime), like any authenticated request. */
  async authenticate(token: string, options?: AuthenticateOptions): Promise<AuthenticatedSession | null> {
    return this.run(
      "authenticate",
      async (scope) => {
        const maxAge = checkMaxAge(options);
        const cookie = checkCookieHeader(options?.cookie);
        const carrier = checkTokenCarrier(options?.carrier);
        const session = await readSessionToken(scope.shards, token, carrier, {
          header: cookie,
          name: scope.config.cookieName,
        });
        const caller = session && (await authenticateToken(scope, session));
        return caller && callerView(caller, scope.at, maxAge);
      },
      () => checkContextInput(options?.context),
    );
  }

  /**
   * The user authenticated again (`factors` just verified): records the factors and gives the
   * session a new token, same id; the old token stops working at once. Null when the token
   * does not prove a live session. Logged `reauthenticated`. After the provider's fresh sign-in,
   * `upstream` as for `create` (its provider and subject the session's own, else a RangeError):
   * its factors and level count, its `session_expiry` bounds the session anew. A session its
   * provider holds yields only to that: with its `auth_time` after the hold, else a RangeError.
   */
  async reauthenticate(input: ReauthenticateRequest): Promise<ReauthenticatedSession | null> {
    return this.run(
      "reauthenticate",
      (scope) => reauthenticated(scope, input),
      () => checkContextInput(input?.context),
    );
  }

  /**
   * The user's live sessions, as GET /auth/sessions lists them, each with the upstream sign-in
   * behind it when it has one; [] for an unknown user.
   */
  async listUserSessions(userId: string, region?: string | null): Promise<BackendSessionView[]> {
    return this.run("listUserSessions", (scope) => listUserSessions(scope, userId, region));
  }

  /** Ends every live session of the user but `exceptSessionId`, each logged `ended` with the reason. */
  async endUserSessions(input: EndUserSessionsInput): Promise<{ ended: number }> {
    return this.run("endUserSessions", (scope) => endUserSessions(scope, input));
  }

  /**
   * Ends every open support session of an agent, for every user (the agent left), each logged
   * `ended` with the reason; one round trip per database. `moving`: how many were in a bucket
   * being moved and did not end yet: call again.
   */
  async endSupportSessions(input: EndSupportSessionsInput): Promise<{ ended: number; moving: number }> {
    return this.run("endSupportSessions", (scope) => endSupportSessions(scope, input));
  }

  /**
   * Ends every live session of the organization's members, each logged `ended` with the reason,
   * at most 100 per database a call, one round trip to each: `complete: false`, call again
   * (`moving`: sessions in a bucket being moved, untouched until it is done). Null: no such organization.
   */
  async endOrganizationSessions(input: OrganizationSessionsInput): Promise<EndedAnswer | null> {
    return this.run("endOrganizationSessions", (scope) => endOrganizationSessions(scope, input));
  }

  /**
   * Holds every live session of the organization's members until each user signs in again
   * (`reauthenticate`), each logged `held` with the reason, bounded as `endOrganizationSessions`.
   * Null: no such organization.
   */
  async holdOrganizationSessions(input: OrganizationSessionsInput): Promise<HeldAnswer | null> {
    return this.run("holdOrganizationSessions", (scope) => holdOrganizationSessions(scope, input));
  }

  /**
   * A page of the organization's live sessions across every database, by id (`limit` 1 to 100,
   * 50 omitted; `cursor` the last page's `nextCursor`), one round trip to each. Null: no such organization.
   */
  async listOrganizationSessions(input: ListOrganizationSessionsInput): Promise<OrganizationSessionsPage | null> {
    return this.run("listOrganizationSessions", (scope) => listOrganizationSessions(scope, input));
  }

  /**
   * Replaces (`mode: "replace"`, the default) or patches (`mode: "merge"`, RFC 7396) a live
   * session's application data by its id: one round trip, one row written, nothing logged.
   * `updated: false` when no live session has that id. Bad data, or a merge that would make
   * it larger than 2 KB, is a TypeError or RangeError, and nothing is written.
   */
  async updateSessionData(input: UpdateSessionDataInput): Promise<{ updated: boolean }> {
    return this.run("updateSessionData", (scope) => updateSessionData(scope, input));
  }

  /** Ends one session, logged `ended` with the reason; `ended: false` when no live session has that id. */
  async endSession(input: EndSessionInput): Promise<{ ended: boolean }> {
    return this.run("endSession", (scope) => endSession(scope, input));
  }
}
