import type { TokenProof } from "../db/liveness.ts";
import type { BucketShard, Shards } from "../db/shards.ts";
import type { TokenCarrier } from "../domain/carrier.ts";
import { boundCookieHash } from "../domain/cookie-header.ts";
import { parseToken } from "../domain/token.ts";

export type { TokenProof } from "../db/liveness.ts";

/** A well-formed session token, and the bucket and database its id names. */
export interface SessionToken {
  proof: TokenProof;
  shard: BucketShard;
}

/**
 * The one place a session token is parsed and placed, for every entry point: null when it
 * is not one this deployment can have issued (whether it is live is decided by the operation's
 * own statement, at no extra round trip). `carrier`: what carried the token (src/domain/carrier.ts).
 * `cookie`: the `Cookie` header that came with the token, whose bound cookie a device-bound
 * session needs; absent for a Bearer token.
 */
export async function readSessionToken(
  shards: Shards,
  token: unknown,
  carrier: TokenCarrier,
  cookie?: { header: string | undefined; name: string },
): Promise<SessionToken | null> {
  const parsed = typeof token === "string" && token !== "" ? await parseToken(token) : null;
  // An id naming no database of this deployment cannot be a token it issued.
  const shard = parsed && shards.forSession(parsed.id);
  if (!parsed || !shard) return null;
  const boundHash = cookie ? await boundCookieHash(cookie.header, cookie.name) : null;
  return { proof: { ...parsed, boundHash, carrier }, shard };
}
