// The failures a caller is told to retry: written as 503s by the HTTP door, thrown as they are
// to RPC callers. Each carries a fixed message, so no driver message reaches a caller.

/**
 * The session database answered "this user's bucket is being moved": nothing was written,
 * and the same request shortly (a second) will be answered (HTTP 503 `moving`; thrown as is
 * to RPC callers).
 */
export class BucketMoving extends Error {
  override name = "BucketMoving";
  constructor() {
    super("This user's sessions are being moved to another database. Retry in a second.");
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
