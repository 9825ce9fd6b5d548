import type { Context } from "hono";
import { routePath } from "hono/route";
import { BucketMoving, DatabaseUnavailable, UpstreamKeysUnavailable } from "../domain/errors.ts";
import { Refused, type RefusedStatus } from "../domain/refusal.ts";
import { logFailure } from "../services/failure-log.ts";
import { type ErrorCode, MESSAGES } from "./error-codes.ts";

// How an error is answered: the API's refusals (`apiError` and its helpers), thrown anywhere in
// a request, and `writeError`, which writes every error once (the codes and messages:
// ./error-codes.ts).

export type ErrorBody = {
  code: ErrorCode;
  message: string;
  /** Only on the admin API's 400: which input rule was broken, as the RPC's TypeError or RangeError says it. */
  detail?: string;
};

interface ApiErrorOptions {
  headers?: Record<string, string>;
  /** A presented token was refused: counts against the client's failure limit. */
  authFailure?: boolean;
  detail?: string;
}

/** A refusal of the API, in its `{code, message}` shape: thrown anywhere in a request, written by `writeError`. */
export function apiError(status: RefusedStatus, code: ErrorCode, options: ApiErrorOptions = {}): Refused {
  const body: ErrorBody = { code, message: MESSAGES[code] };
  if (options.detail !== undefined) body.detail = options.detail;
  return new Refused(status, body, options.headers, options.authFailure);
}

/** 401 with the RFC 6750 challenge; `error="invalid_token"` only when a token was presented. */
export function unauthorized(code: ErrorCode, tokenPresented: boolean, realm: "auth" | "admin" = "auth"): Refused {
  const challenge = `Bearer realm="${realm}"${tokenPresented ? ', error="invalid_token"' : ""}`;
  return apiError(401, code, {
    headers: { "WWW-Authenticate": challenge },
    // not_authorized follows a successful authentication: the token was fine.
    authFailure: tokenPresented && code !== "not_authorized",
  });
}

/**
 * Step-up refused (RFC 9470): the token is fine, its authentication too old for this act.
 * Not a failed authentication, so never counted by the limiter.
 */
export function reauthenticationRequired(maxAgeSeconds: number): Refused {
  return apiError(401, "reauthentication_required", {
    headers: {
      "WWW-Authenticate": `Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="${maxAgeSeconds}"`,
    },
  });
}

/** A support session asked for what only the user may do (src/domain/support.ts); the token is fine. */
export function supportRefused(): Refused {
  return apiError(403, "support_session_refused");
}

/** The logouts' 400 for a token that is malformed or no longer live. */
export function sessionInvalid(): Refused {
  return apiError(400, "session_invalid", { authFailure: true });
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

/**
 * The one place an error becomes the HTTP answer (the app's `onError` and `notFound`, an
 * upstream route's `answer`): a refusal with the answer it carries; any failure, its one log
 * line (src/services/failure-log.ts), then a bare 503 for one to retry, else a bare 500.
 */
export function writeError(c: Context, error: unknown): Response {
  if (error instanceof Refused) return c.json(error.body, error.status, error.headers);
  const route = routePath(c, -1);
  logFailure(error, { method: c.req.method, route: route.endsWith("*") ? null : route }, requestIdOf(c));
  if (error instanceof DatabaseUnavailable) {
    return bare(503, "service_unavailable", { "Retry-After": String(RETRY_AFTER_SECONDS) });
  }
  if (error instanceof UpstreamKeysUnavailable) {
    return bare(503, "service_unavailable", { "Retry-After": String(error.retryAfterSeconds) });
  }
  if (error instanceof BucketMoving) return bare(503, "moving", { "Retry-After": String(RETRY_AFTER_SECONDS) });
  return bare(500, "internal_error");
}
