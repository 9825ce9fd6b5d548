import { SUPPORT_SESSIONS_PER_USER } from "./support.ts";

// Why an operation by a session's token did nothing: the one vocabulary every service answers
// with, and each entry point turns into its own answer (src/http/refusals.ts for the HTTP API).
export const REFUSALS = [
  // The token proves no live session (unknown, ended, expired, idle, or without its bound cookie).
  "not_live",
  // RFC 9470's step-up challenge: the session is held (src/domain/actions.ts); a sign-in too old
  // to end another session is a `StaleSignIn` (below), which names its age.
  "step-up",
  // Support access asked for what only the user may do (src/domain/support.ts).
  "support",
  // No session id was given to delete.
  "id_required",
  // The id names no live session of the caller's user.
  "not_yours",
  // Device binding: the session is bound already, or the proof is not over its challenge.
  "already_bound",
  "wrong_challenge",
] as const;

/**
 * RFC 9470's step-up for a last sign-in too old to end another session: older than the caller's
 * step-up age (SESSION_STEP_UP_MAX_AGE_SECONDS, or its organization's where it sets one), which
 * the challenge names as its `max_age`.
 */
export class StaleSignIn {
  readonly maxAgeSeconds: number;
  constructor(maxAgeSeconds: number) {
    this.maxAgeSeconds = maxAgeSeconds;
  }
}

export type Refusal = (typeof REFUSALS)[number] | StaleSignIn;

export function isRefusal(value: unknown): value is Refusal {
  return value instanceof StaleSignIn || (typeof value === "string" && (REFUSALS as readonly string[]).includes(value));
}

// Beside it, each named for what it refuses and never a bare "refusal", with its own entry point:
// - SupportRefusal (below): why a support session was not opened (the RPC's RangeError, the admin API's 400).
// - RefreshOutcome (src/db/device-binding.ts): what a DBSC refresh did; its `not_live` is this vocabulary's.
// - ReportRefusal (src/services/report.ts): a report token that ends nothing, 404 or 410 with its code.
// - MoveRefused (src/services/moves.ts): an operator's bucket move refused (`npm run shards:move`), no entry point's.
// A refusal decided where its answer is known is thrown as `Refused` (below), carrying it: a
// stream management request's (src/domain/ssf/streams.ts), an inbound SET's (RFC 8935,
// src/domain/upstreams/inbound.ts), an upstream logout's (src/domain/upstreams/logout.ts), and every
// refusal of the HTTP API (src/http/refusals.ts).

/** The statuses a request is refused with: the caller's to fix, never the service's failure. */
export type RefusedStatus = 400 | 401 | 403 | 404 | 405 | 409 | 410 | 413 | 414 | 415 | 429;

/**
 * A request refused, thrown where the rule it breaks is decided, carrying its whole answer:
 * the status, the JSON body in its contract's shape (the API's `{code, message}`, RFC 8935's
 * `{err, description}`, OpenID's `{error, error_description}`), the headers, and whether a
 * presented credential was refused (counted by the failure limiter). The HTTP app's one
 * `onError` writes it as it is; any other error is the service's failure. Plain TypeScript,
 * not Hono's HTTPException: the domain throws it, and the domain has no Hono.
 */
export class Refused extends Error {
  override name = "Refused";
  readonly status: RefusedStatus;
  readonly body: Readonly<Record<string, string>>;
  readonly headers: Readonly<Record<string, string>>;
  readonly authFailure: boolean;

  constructor(
    status: RefusedStatus,
    body: Readonly<Record<string, string>>,
    headers: Readonly<Record<string, string>> = {},
    authFailure = false,
  ) {
    super(`refused ${status}`);
    this.status = status;
    this.body = body;
    this.headers = headers;
    this.authFailure = authFailure;
  }
}

/** Why a support session was not opened, when it was not. */
export type SupportRefusal = "unknown_user" | "too_many_open";

/** What a service returns for the RPC's verbs (and the admin API's): a support refusal, or `support` re-authenticating. */
export type CallRefusal = SupportRefusal | "support";

const CALL_REFUSALS: Record<CallRefusal, string> = {
  unknown_user: "userId names no user this service knows: no session and nothing in their log",
  too_many_open: `the user has ${SUPPORT_SESSIONS_PER_USER} open support sessions, the most allowed: end one first`,
  support: "a support session is never re-authenticated: open a new one",
};

export function isCallRefusal(value: unknown): value is CallRefusal {
  return typeof value === "string" && Object.hasOwn(CALL_REFUSALS, value);
}

/** The sentence an entry point answers a call refusal with (the RPC's RangeError message, the admin API's `detail`). */
export function callRefusalSentence(refusal: CallRefusal): string {
  return CALL_REFUSALS[refusal];
}
