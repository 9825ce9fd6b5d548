import { UPSTREAM_KEYS_RETRY_SECONDS, UpstreamKeysUnavailable } from "../domain/errors.ts";
import type { Jws, PublicKey } from "../domain/jws.ts";
import { keyOf, type Upstream } from "../domain/upstreams.ts";

// The one path to an upstream's signing keys, for its SETs, its logout tokens and its
// revocation requests alike: inline, or fetched from its jwks_uri and kept per isolate.

/** A fetched key set is used this long; an unknown `kid` fetches again sooner, at most once a minute. */
const KEYS_MAX_AGE_MS = 5 * 60_000;
const KEYS_REFETCH_MS = 60_000;
/** An upstream that does not answer is not waited on longer than this. */
const FETCH_TIMEOUT_MS = 5_000;

// Per isolate, by URL: an upstream's key set is fetched once every few minutes, not per token.
const fetchedKeys = new Map<string, { keys: readonly unknown[]; at: number }>();
// Per isolate, by URL: when a fetch last failed. A burst of tokens during the upstream's outage
// costs one fetch per Retry-After, not one each.
const failedAt = new Map<string, number>();

async function fetchKeys(upstream: Upstream, uri: string, now: number): Promise<readonly unknown[]> {
  const failed = failedAt.get(uri);
  if (failed !== undefined && now - failed < UPSTREAM_KEYS_RETRY_SECONDS * 1000)
    throw new UpstreamKeysUnavailable(upstream.name);
  let keys: unknown;
  try {
    const response = await fetch(uri, {
      headers: { Accept: "application/jwk-set+json, application/json" },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    keys = response.ok ? ((await response.json()) as { keys?: unknown } | null)?.keys : undefined;
  } catch {
    keys = undefined;
  }
  if (!Array.isArray(keys)) {
    failedAt.set(uri, now);
    throw new UpstreamKeysUnavailable(upstream.name);
  }
  failedAt.delete(uri);
  fetchedKeys.set(uri, { keys, at: now });
  return keys;
}

/** The key the JWS names in the upstream's cached key set, fetched when older than its maximum age. */
async function remoteKey(upstream: Upstream, uri: string, jws: Jws) {
  const now = Date.now();
  const cached = fetchedKeys.get(uri);
  if (!cached || now - cached.at >= KEYS_MAX_AGE_MS) return keyOf(await fetchKeys(upstream, uri, now), jws);
  const key = keyOf(cached.keys, jws);
  // A kid not seen yet: the upstream may have rotated its keys since they were fetched.
  if (key || now - cached.at < KEYS_REFETCH_MS) return key;
  return keyOf(await fetchKeys(upstream, uri, now), jws);
}

/**
 * The upstream's key that the JWS names: undefined when it has none by that `kid` (after one
 * refetch at most), "unusable" when that key cannot verify the JWS's algorithm. Throws
 * UpstreamKeysUnavailable when its key set cannot be fetched.
 */
export function upstreamKey(upstream: Upstream, jws: Jws): Promise<PublicKey | "unusable" | undefined> {
  return "jwks" in upstream.keys
    ? Promise.resolve(keyOf(upstream.keys.jwks, jws))
    : remoteKey(upstream, upstream.keys.jwksUri, jws);
}
