import { createLocalJWKSet, createRemoteJWKSet, customFetch, errors, type FlattenedJWSInput, type JWK } from "jose";
import { UPSTREAM_KEYS_RETRY_SECONDS, UpstreamKeysUnavailable } from "../domain/errors.ts";
import type { Jws } from "../domain/jws.ts";
import type { Upstream } from "../domain/upstreams.ts";

// The one path to an upstream's signing keys, for its SETs, its logout tokens and its
// revocation requests alike: jose's key sets, inline or fetched from its jwks_uri and kept per
// isolate. jose picks the key by the header's `kid` and `alg` only.

/** A fetched key set is used this long; an unknown `kid` fetches again sooner, at most once a minute. */
const KEYS_MAX_AGE_MS = 5 * 60_000;
const KEYS_REFETCH_MS = 60_000;
/** An upstream that does not answer is not waited on longer than this. */
const FETCH_TIMEOUT_MS = 5_000;

type KeySet = ReturnType<typeof createLocalJWKSet> | ReturnType<typeof createRemoteJWKSet>;

// Per isolate, by the parsed upstream (src/domain/upstreams.ts keeps one per var value).
const inlineSets = new WeakMap<Upstream, KeySet>();
// Per isolate, by URL: an upstream's key set is fetched once every few minutes, not per token.
const remoteSets = new Map<string, KeySet>();
// Per isolate, by URL: when a fetch last failed. A burst of tokens during the upstream's outage
// costs one fetch per Retry-After, not one each.
const failedAt = new Map<string, number>();

/** A fetch that did not answer (refused, timed out), or one not tried since the last failed. */
class FetchFailed extends Error {}

function remoteSet(uri: string): KeySet {
  let set = remoteSets.get(uri);
  if (!set) {
    set = createRemoteJWKSet(new URL(uri), {
      cacheMaxAge: KEYS_MAX_AGE_MS,
      cooldownDuration: KEYS_REFETCH_MS,
      timeoutDuration: FETCH_TIMEOUT_MS,
      headers: { Accept: "application/jwk-set+json, application/json" },
      [customFetch]: async (url: string, init: RequestInit) => {
        const failed = failedAt.get(uri);
        if (failed !== undefined && Date.now() - failed < UPSTREAM_KEYS_RETRY_SECONDS * 1000) throw new FetchFailed();
        try {
          return await fetch(url, init);
        } catch {
          failedAt.set(uri, Date.now());
          throw new FetchFailed();
        }
      },
    });
    remoteSets.set(uri, set);
  }
  return set;
}

function keySetOf(upstream: Upstream): KeySet {
  if ("jwksUri" in upstream.keys) return remoteSet(upstream.keys.jwksUri);
  let set = inlineSets.get(upstream);
  if (!set) {
    set = createLocalJWKSet({ keys: upstream.keys.jwks as JWK[] });
    inlineSets.set(upstream, set);
  }
  return set;
}

/** Whether the error is jose's for a key set that came but cannot be used: not 200, not JSON, not a JWK Set, too slow. */
const isUnusableAnswer = (error: unknown) =>
  error instanceof errors.JWKSTimeout ||
  error instanceof errors.JWKSInvalid ||
  (error instanceof errors.JOSEError && error.code === errors.JOSEError.code);

/**
 * The upstream's key that the JWS names, by jose: "unknown" when it has none by that `kid`
 * (after one refetch at most; a JWS without a `kid` names the only key of a set of one),
 * "unusable" when the key it names cannot verify the JWS's algorithm (another type, meant for
 * encryption). Throws UpstreamKeysUnavailable when its key set cannot be fetched.
 */
export async function upstreamKey(
  upstream: Upstream,
  { header }: Jws,
  token: FlattenedJWSInput,
): Promise<CryptoKey | "unknown" | "unusable"> {
  const set = keySetOf(upstream);
  const named = () => {
    const keys = set.jwks()?.keys ?? [];
    return header.kid === undefined ? keys.length === 1 : keys.some((key) => key.kid === header.kid);
  };
  try {
    const key = await set(header, token);
    return header.kid !== undefined || named() ? key : "unknown";
  } catch (error) {
    if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
      return named() ? "unusable" : "unknown";
    if (error instanceof FetchFailed) throw new UpstreamKeysUnavailable(upstream.name);
    if ("jwksUri" in upstream.keys && isUnusableAnswer(error)) {
      failedAt.set(upstream.keys.jwksUri, Date.now());
      throw new UpstreamKeysUnavailable(upstream.name);
    }
    throw error;
  }
}
