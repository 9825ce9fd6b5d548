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
