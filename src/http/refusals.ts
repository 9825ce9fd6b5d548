import type { Context } from "hono";
import { type CallRefusal, callRefusalSentence, type Refusal } from "../domain/refusal.ts";
import type { SetRefused } from "../domain/ssf/inbound.ts";
import { UPSTREAM_ERRORS, type UpstreamRequestRefused } from "../domain/upstream-logout.ts";
import type { ReportRefusal } from "../services/report.ts";
import type { Answer } from "../services/ssf/streams.ts";
import type { AppEnv } from "./app-env.ts";
import { ApiError, reauthenticationRequired, sessionInvalid, supportRefused, unauthorized } from "./errors.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

/**
 * What a route's contract answers for a token that proves no live session: the list, the delete,
 * the events and device binding 401 `invalid_token`; `DELETE /auth/logout` 401
 * `session_invalid`; `POST /auth/logout` 400 `session_invalid`.
 */
export type DeadToken = "invalid_token" | "session_invalid" | "session_invalid_400";

// Every error answer of the HTTP API is built here (or, for the token's 401s and the answers of
// a failure, in ./errors.ts): a route, a middleware or a door's check throws what one of these
// functions returns, and `writeError` writes it.

/** A path that does not exist here (an unknown one, or a feature that is off: transmitter, upstreams, issuer, admin API). */
export const notFound = () => new ApiError(404, "not_found");

/** A known path asked with a method it does not answer; `Allow` lists those it does. */
export const wrongMethod = (methods: readonly string[]) =>
  new ApiError(405, "method_not_allowed", { headers: { Allow: methods.join(", ") } });

/** A path past its bound (src/http/middleware/input-bounds.ts). */
export const uriTooLong = () => new ApiError(414, "uri_too_long");

/** A body past its route's bound. */
export const bodyTooLarge = () => new ApiError(413, "body_too_large");

/** A body sent as another media type than its route reads. */
export const unsupportedMediaType = () => new ApiError(415, "unsupported_media_type");

/** A cookie request from another site (src/http/csrf.ts). */
export const crossSiteRequest = () => new ApiError(403, "cross_site_request");

/** Too many refused credentials from this client (src/http/rate-limit.ts). */
export const rateLimited = (retryAfterSeconds: number) =>
  new ApiError(429, "rate_limited", { headers: { "Retry-After": String(retryAfterSeconds) } });

/** `DELETE /auth/logout?scope=` with a value other than `others`. */
export const invalidScope = () => new ApiError(400, "invalid_scope");

/** `GET /auth/whoami?max_age=` that is not one whole number of seconds. */
export const invalidMaxAge = () => new ApiError(400, "invalid_max_age");

/** A device proof that is missing, malformed or over another challenge: a refused credential. */
export const invalidDeviceProof = () => new ApiError(400, "device_proof_invalid", { authFailure: true });

/** A device-bound refresh whose proof did not verify: the browser signs the next challenge. */
export const deviceProofRequired = (challenge: string) =>
  new ApiError(403, "device_proof_required", { headers: { "Secure-Session-Challenge": challenge } });

/** The stream management API: the result, or 401 when the receiver's credential was refused inside the statement. */
export function receiverAnswer<T>(answer: Answer<T>): T {
  if (!answer.receiver) throw unauthorized("invalid_token", true);
  return answer.result;
}

/** A stream's result, or 404 `stream_not_found` when the service found none (null or false). */
export function streamFound<T>(value: T | null | false): T {
  if (value === null || value === false) throw new ApiError(404, "stream_not_found");
  return value;
}

/** `?stream_id` is required here. */
export const streamIdRequired = () => new ApiError(400, "stream_id_required");

/** The receiver has as many streams as it may. */
export const streamLimitReached = () => new ApiError(403, "stream_limit_reached");

/** A verification asked for sooner than `min_verification_interval`: the seconds to wait. */
export const verificationTooFrequent = (waitSeconds: number) =>
  new ApiError(429, "verification_too_frequent", { headers: { "Retry-After": String(waitSeconds) } });

/** An inbound SET refused (RFC 8935 §2.3): 400, `{err, description}` in English, not the API's `{code, message}`. The description is fixed text, never the SET. */
export function setRefusal<E extends AppEnv>(c: Context<E>, refused: SetRefused): Response {
  return c.json({ err: refused.err, description: refused.description }, 400, { "Content-Language": "en" });
}

/**
 * An upstream's logout or revocation refused (OpenID Connect Back-Channel Logout §2.8, the
 * global token revocation draft's statuses): `{error, error_description}`; nothing ended.
 */
export function upstreamRefusal<E extends AppEnv>(c: Context<E>, refused: UpstreamRequestRefused): Response {
  const status = UPSTREAM_ERRORS[refused.error];
  const headers: Record<string, string> = { "Content-Language": "en" };
  if (status === 401) headers["WWW-Authenticate"] = 'Bearer error="invalid_token"';
  return c.json({ error: refused.error, error_description: refused.description }, status, headers);
}

/** The admin API: a parameter or body the call refuses, the broken rule as `detail`. */
export const invalidInput = (detail: string) => new ApiError(400, "invalid_input", { detail });

/** The admin API: a call the service refused (support access, a support session re-authenticating), with the RPC's sentence. */
export const callRefused = (refusal: CallRefusal) => invalidInput(callRefusalSentence(refusal));

/** The admin API: no live session with that id. */
export const sessionNotFound = () => new ApiError(404, "session_not_found");

/** The admin API: a key without the call's scope (RFC 6750). */
export const insufficientScope = (scope: string) =>
  new ApiError(403, "insufficient_scope", {
    headers: { "WWW-Authenticate": `Bearer realm="admin", error="insufficient_scope", scope="${scope}"` },
  });

const REPORT_REFUSED = {
  unknown: [404, "report_not_found"],
  used: [410, "report_used"],
  expired: [410, "report_expired"],
  session_ended: [410, "session_ended"],
} as const;

/** A report token that does nothing (src/services/report.ts): a refused credential, counted as one. */
export function reportRefused(refusal: ReportRefusal): ApiError {
  const [status, code] = REPORT_REFUSED[refusal];
  return new ApiError(status, code, { authFailure: true });
}

/** The one place a service's refusal becomes the HTTP answer (RFC 9470's challenge for step-up). */
export function refused<E extends ScopedEnv>(
  c: Context<E>,
  refusal: Refusal,
  dead: DeadToken = "invalid_token",
): ApiError {
  switch (refusal) {
    case "not_live":
      return dead === "session_invalid_400" ? sessionInvalid() : unauthorized(dead, true);
    case "step-up":
      return reauthenticationRequired(c.var.scope.config.stepUpMaxAgeSeconds);
    case "support":
      return supportRefused();
    case "id_required":
      return new ApiError(400, "session_id_required");
    case "not_yours":
      return unauthorized("not_authorized", false);
    case "already_bound":
      return new ApiError(409, "device_already_bound");
    case "wrong_challenge":
      return invalidDeviceProof();
  }
}
