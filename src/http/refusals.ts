import type { Context } from "hono";
import { type CallRefusal, callRefusalSentence, type Refusal, type Refused, StaleSignIn } from "../domain/refusal.ts";
import type { ReportRefusal } from "../services/report.ts";
import type { Answer } from "../services/ssf/streams.ts";
import { apiError, reauthenticationRequired, sessionInvalid, supportRefused, unauthorized } from "./errors.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

/**
 * What a route's contract answers for a token that proves no live session: the list, the delete,
 * the events and device binding 401 `invalid_token`; `DELETE /auth/logout` 401
 * `session_invalid`; `POST /auth/logout` 400 `session_invalid`.
 */
export type DeadToken = "invalid_token" | "session_invalid" | "session_invalid_400";

// Every refusal of the HTTP API in its `{code, message}` shape is built here (or, for the token's
// 401s, in ./errors.ts): a route, a middleware or an entry point's check throws what one of these
// functions returns, a `Refused` carrying its answer, and `writeError` writes it. The Shared
// Signals' and the identity providers' refusals, in their specifications' shapes, are built
// where they are decided (src/domain/upstreams/inbound.ts, src/domain/upstreams/logout.ts).

/** A path that does not exist here (an unknown one, or a feature that is off: transmitter, upstreams, issuer, admin API). */
export const notFound = () => apiError(404, "not_found");

/** A known path asked with a method it does not answer; `Allow` lists those it does. */
export const wrongMethod = (methods: readonly string[]) =>
  apiError(405, "method_not_allowed", { headers: { Allow: methods.join(", ") } });

/** A path past its limit (src/http/middleware/input-limits.ts). */
export const uriTooLong = () => apiError(414, "uri_too_long");

/** A body past its route's bound. */
export const bodyTooLarge = () => apiError(413, "body_too_large");

/** A body sent as another media type than its route reads. */
export const unsupportedMediaType = () => apiError(415, "unsupported_media_type");

/** A cookie request from another site (src/http/csrf.ts). */
export const crossSiteRequest = () => apiError(403, "cross_site_request");

/** Too many refused credentials from this client (src/http/rate-limit.ts). */
export const rateLimited = (retryAfterSeconds: number) =>
  apiError(429, "rate_limited", { headers: { "Retry-After": String(retryAfterSeconds) } });

/** `DELETE /auth/logout?scope=` with a value other than `others`. */
export const invalidScope = () => apiError(400, "invalid_scope");

/** `GET /auth/whoami?max_age=` that is not one whole number of seconds. */
export const invalidMaxAge = () => apiError(400, "invalid_max_age");

/** A device proof that is missing, malformed or over another challenge: a refused credential. */
export const invalidDeviceProof = () => apiError(400, "device_proof_invalid", { authFailure: true });

/** A device-bound refresh whose proof did not verify: the browser signs the next challenge. */
export const deviceProofRequired = (challenge: string) =>
  apiError(403, "device_proof_required", { headers: { "Secure-Session-Challenge": challenge } });

/** The stream management API: the result, or 401 when the receiver's credential was refused inside the statement. */
export function receiverAnswer<T>(answer: Answer<T>): T {
  if (!answer.receiver) throw unauthorized("invalid_token", true);
  return answer.result;
}

/** A stream's result, or 404 `stream_not_found` when the service found none (null or false). */
export function streamFound<T>(value: T | null | false): T {
  if (value === null || value === false) throw apiError(404, "stream_not_found");
  return value;
}

/** `?stream_id` is required here. */
export const streamIdRequired = () => apiError(400, "stream_id_required");

/** The receiver has as many streams as it may. */
export const streamLimitReached = () => apiError(403, "stream_limit_reached");

/** A verification asked for sooner than `min_verification_interval`: the seconds to wait. */
export const verificationTooFrequent = (waitSeconds: number) =>
  apiError(429, "verification_too_frequent", { headers: { "Retry-After": String(waitSeconds) } });

/** The admin API: a parameter or body the call refuses, the broken rule as `detail`. */
export const invalidInput = (detail: string) => apiError(400, "invalid_input", { detail });

/** The admin API: a call the service refused (support access, a support session re-authenticating), with the RPC's sentence. */
export const callRefused = (refusal: CallRefusal) => invalidInput(callRefusalSentence(refusal));

/** The admin API: no live session with that id. */
export const sessionNotFound = () => apiError(404, "session_not_found");

/** No organization of this id in the directory (one outside the key's own is `not_found`, src/http/admin/auth.ts). */
export const organizationNotFound = () => apiError(404, "organization_not_found");

/** The admin API: a key without the call's scope (RFC 6750). */
export const insufficientScope = (scope: string) =>
  apiError(403, "insufficient_scope", {
    headers: { "WWW-Authenticate": `Bearer realm="admin", error="insufficient_scope", scope="${scope}"` },
  });

const REPORT_REFUSED = {
  unknown: [404, "report_not_found"],
  used: [410, "report_used"],
  expired: [410, "report_expired"],
  session_ended: [410, "session_ended"],
} as const;

/** A report token that does nothing (src/services/report.ts): a refused credential, counted as one. */
export function reportRefused(refusal: ReportRefusal): Refused {
  const [status, code] = REPORT_REFUSED[refusal];
  return apiError(status, code, { authFailure: true });
}

/** The one place a service's refusal becomes the HTTP answer (RFC 9470's challenge for step-up). */
export function refused<E extends ScopedEnv>(
  c: Context<E>,
  refusal: Refusal,
  dead: DeadToken = "invalid_token",
): Refused {
  if (refusal instanceof StaleSignIn) return reauthenticationRequired(refusal.maxAgeSeconds);
  switch (refusal) {
    case "not_live":
      return dead === "session_invalid_400" ? sessionInvalid() : unauthorized(dead, true);
    case "step-up":
      return reauthenticationRequired(c.var.scope.config.stepUpMaxAgeSeconds);
    case "support":
      return supportRefused();
    case "id_required":
      return apiError(400, "session_id_required");
    case "not_yours":
      return unauthorized("not_authorized", false);
    case "already_bound":
      return apiError(409, "device_already_bound");
    case "wrong_challenge":
      return invalidDeviceProof();
  }
}
