// The failures a caller is told to retry: written as 503s by the HTTP entry point, thrown as they are
// to RPC callers. Each carries a fixed message, so no driver message reaches a caller.

/**
 * The session database answered "this user's bucket is being moved": nothing was written,
 * and the same request shortly (a second) will be answered (HTTP 503 `moving`; thrown as is
 * to RPC callers). `unboundTarget`: the binding the bucket moved to, when this worker has none
 * of that name (the move ran before its binding was deployed), for the operator's log line.
 */
export class BucketMoving extends Error {
  override name = "BucketMoving";
  readonly unboundTarget: string | null;
  constructor(unboundTarget: string | null = null) {
    super("This user's sessions are being moved to another database. Retry in a second.");
    this.unboundTarget = unboundTarget;
  }
}

/**
 * D1 is overloaded, or did not answer twice in a row: nothing is known to be wrong with the
 * request, and it may be sent again shortly (HTTP 503 with Retry-After; thrown as is to RPC
 * callers). Carries no cause: driver messages can quote SQL and bound values.
 */
export class DatabaseUnavailable extends Error {
  override name = "DatabaseUnavailable";
  constructor() {
    super("The session database is unavailable. Retry shortly.");
  }
}

/** After a failed fetch of an upstream's keys, none is tried again for this long: the 503's Retry-After. */
export const UPSTREAM_KEYS_RETRY_SECONDS = 10;

/**
 * An upstream's key set could not be fetched (or was not a JWK Set), or lacks the token's `kid`
 * and cannot be fetched again for `retryAfterSeconds` (jose's cooldown: the key may be one the
 * upstream published since): its token may be fine, nothing was acted on, and the upstream may
 * send it again (HTTP 503 with Retry-After). Names the upstream and why, for the operator's log
 * line; never the response's body.
 */
export class UpstreamKeysUnavailable extends Error {
  override name = "UpstreamKeysUnavailable";
  readonly upstream: string;
  readonly why: "unavailable" | "unknown_kid";
  readonly retryAfterSeconds: number;
  /** What failed, for the operator's line: the fetch's error class, or `failed_recently`; null for an unknown `kid`. */
  readonly failure: string | null;
  constructor(
    upstream: string,
    why: "unavailable" | "unknown_kid" = "unavailable",
    retryAfterSeconds = UPSTREAM_KEYS_RETRY_SECONDS,
    failure: string | null = null,
  ) {
    super("The identity provider's signing keys could not be fetched. Retry shortly.");
    this.upstream = upstream;
    this.why = why;
    this.retryAfterSeconds = retryAfterSeconds;
    this.failure = failure;
  }
}
