import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { routePath } from "hono/route";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ConfigError } from "../domain/config.ts";
import { BucketMoving, DatabaseUnavailable } from "../domain/errors.ts";
import { Refusal, type RefusalCode } from "../domain/ssf/streams.ts";
import { logFailure } from "../services/failure-log.ts";

// Every error the API can answer, with its one message. Clients branch on `code`. The one
// list of error codes: the type and the OpenAPI document derive from it.
export const MESSAGES = {
  invalid_token: "The access token is missing, invalid or expired.",
  session_id_required: "A session id is required.",
  not_authorized: "You are not authorized to delete this session.",
  token_required: "No authentication token was provided.",
  session_invalid: "The session is invalid or has already ended.",
  cross_site_request: "Cross-site requests authenticated by cookie are not allowed.",
  method_not_allowed: "This method is not allowed on this path.",
  not_found: "No such endpoint.",
  invalid_scope: "The scope parameter must be omitted or be 'others'.",
  rate_limited: "Too many failed authentication attempts. Retry later.",
  uri_too_long: "The request path is too long.",
  internal_error: "Something went wrong on our side. Please try again.",
  service_unavailable: "The service is busy or briefly unreachable. Retry after the Retry-After delay.",
  moving: "Your sessions are being moved to another database; nothing was changed. Retry after the Retry-After delay.",
  reauthentication_required:
    "Sign in again: your last sign-in is too old to end other sessions, or this session was used from another browser or network.",
  device_proof_invalid:
    "The device-binding proof is missing, malformed, not signed by its key, or not over a challenge this session was given.",
  device_proof_required: "Sign the challenge in Secure-Session-Challenge with this session's device key.",
  device_already_bound: "This session is already bound to a device key.",
  invalid_request_body: "The request body must be a JSON object whose members this endpoint takes, each valid.",
  invalid_delivery:
    "delivery must be poll (urn:ietf:rfc:8936), or push (urn:ietf:rfc:8935) to an https endpoint_url on a public host.",
  invalid_subject:
    "subject must name a user: iss_sub issued by this transmitter, opaque, or complex with such a user member.",
  stream_id_required: "The stream_id query parameter is required.",
  stream_not_found: "No stream with this id belongs to this receiver.",
  stream_limit_reached: "This receiver has as many streams as it may; delete one first.",
  verification_too_frequent:
    "A verification of this stream was asked for too recently. Retry after the Retry-After delay.",
  body_too_large: "The request body is too large.",
  support_session_refused:
    "A support session cannot do this: only the user ends their other sessions, and support access is never re-authenticated or bound to a device.",
} as const satisfies Record<RefusalCode, string> & Record<string, string>;

export type ErrorCode = keyof typeof MESSAGES;

export interface ErrorBody {
  code: ErrorCode;
  message: string;
}

interface ApiErrorOptions {
  headers?: Record<string, string>;
  /** A presented token was refused: counts against the client's failure limit. */
  authFailure?: boolean;
}

/** Thrown anywhere in a request; written once, by `writeError`. */
export class ApiError extends HTTPException {
  readonly code: ErrorCode;
  readonly responseHeaders: Record<string, string>;
  readonly authFailure: boolean;

  constructor(status: ContentfulStatusCode, code: ErrorCode, options: ApiErrorOptions = {}) {
    super(status, { message: MESSAGES[code] });
    this.code = code;
    this.responseHeaders = options.headers ?? {};
    this.authFailure = options.authFailure ?? false;
  }
}

/** 401 with the RFC 6750 challenge; `error="invalid_token"` only when a token was presented. */
export function unauthorized(code: ErrorCode, tokenPresented: boolean): ApiError {
  const challenge = `Bearer realm="auth"${tokenPresented ? ', error="invalid_token"' : ""}`;
  return new ApiError(401, code, {
    headers: { "WWW-Authenticate": challenge },
    // not_authorized follows a successful authentication: the token was fine.
    authFailure: tokenPresented && code !== "not_authorized",
  });
}

/**
 * Step-up refused (RFC 9470): the token is fine, its authentication too old for this act.
 * Not a failed authentication, so never counted by the limiter.
 */
export function reauthenticationRequired(maxAgeSeconds: number): ApiError {
  return new ApiError(401, "reauthentication_required", {
    headers: {
      "WWW-Authenticate": `Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="${maxAgeSeconds}"`,
    },
  });
}

/** A support session asked for what only the user may do (src/domain/support.ts); the token is fine. */
export function supportRefused(): ApiError {
  return new ApiError(403, "support_session_refused");
}

/** The logouts' 400 for a token that is malformed or no longer live. */
export function sessionInvalid(): ApiError {
  return new ApiError(400, "session_invalid", { authFailure: true });
}

/** Seconds a client waits before retrying after a 503: D1's queues drain, and a bucket moves, in milliseconds to seconds. */
const RETRY_AFTER_SECONDS = 1;

/**
 * A bare response: nothing the failed request had prepared (a cleared cookie) goes out, so
 * a client whose logout failed keeps its cookie and can retry.
 */
function bare(status: 500 | 503, code: ErrorCode, headers: Record<string, string> = {}): Response {
  const body: ErrorBody = { code, message: MESSAGES[code] };
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

/** Cloudflare's Ray ID, what Workers Logs are searched by; a fresh id where there is none (wrangler dev). */
function requestIdOf(c: Context): string {
  return c.req.header("cf-ray") ?? crypto.randomUUID();
}

export function writeError(c: Context, error: unknown): Response {
  if (error instanceof Refusal) return writeError(c, new ApiError(400, error.code));
  if (error instanceof ApiError) {
    const body: ErrorBody = { code: error.code, message: error.message };
    return c.json(body, error.status, error.responseHeaders);
  }
  if (error instanceof DatabaseUnavailable) {
    console.warn(JSON.stringify({ level: "warn", event: "database_unavailable" }));
    return bare(503, "service_unavailable", { "Retry-After": String(RETRY_AFTER_SECONDS) });
  }
  if (error instanceof BucketMoving) {
    console.warn(JSON.stringify({ level: "warn", event: "bucket_moving" }));
    return bare(503, "moving", { "Retry-After": String(RETRY_AFTER_SECONDS) });
  }
  if (error instanceof ConfigError) {
    // Loud and whole: the message names only the var and the rule it breaks.
    console.error(JSON.stringify({ level: "error", event: "config_error", message: error.message }));
    return bare(500, "internal_error");
  }
  const route = routePath(c, -1);
  logFailure(error, { method: c.req.method, route: route.endsWith("*") ? null : route }, requestIdOf(c));
  return bare(500, "internal_error");
}
