import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  type ExportedJWKSCache,
  errors,
  type FlattenedJWSInput,
  type JWK,
  type JWKSCacheInput,
  jwksCache,
  type RemoteJWKSet,
} from "jose";
import { UPSTREAM_KEYS_RETRY_SECONDS, UpstreamKeysUnavailable } from "../../domain/errors.ts";
import { type Jws, tokenFault, verifyJws } from "../../domain/jws.ts";
import type { Refused } from "../../domain/refusal.ts";
import type { Upstream } from "../../domain/upstreams/config.ts";

// The one path to an upstream's signing keys, for its SETs, its logout tokens and its
// revocation requests alike: jose's key sets, inline or fetched from its jwks_uri and kept per
// isolate. jose picks the key by the header's `kid` and `alg` only.
//
// A `kid` unknown to a set fetched less than a minute ago (jose's cooldown) may be a key the
// upstream published since: not refused, for an upstream takes a 400 as final (OpenID Connect
// Back-Channel Logout §2.8) and the user would stay signed in here; answered 503 with the seconds
// until the cooldown ends, after which its resend fetches the set again. A `kid` unknown to a set
// fetched for this very token is refused: the upstream's keys lack it now, and a resend would not
// help. Either way a forged `kid` costs at most one fetch per cooldown.

/** A fetched key set is used this long; an unknown `kid` fetches again sooner, at most once a minute. */
const KEYS_MAX_AGE_MS = 5 * 60_000;
const KEYS_REFETCH_MS = 60_000;
/** An upstream that does not answer is not waited on longer than this. */
const FETCH_TIMEOUT_MS = 5_000;

type KeySet = ReturnType<typeof createLocalJWKSet> | RemoteJWKSet;

/** A fetched key set, and jose's record of when it last fetched it (`uat`, ms), kept by its `jwksCache` option. */
interface RemoteKeys {
  set: RemoteJWKSet;
  fetched: Partial<ExportedJWKSCache>;
}

// Per isolate, by the parsed upstream (src/domain/upstreams/config.ts keeps the last var value's).
const inlineSets = new WeakMap<Upstream, KeySet>();
// Per isolate, by URL: an upstream's key set is fetched once every few minutes, not per token.
const remoteSets = new Map<string, RemoteKeys>();
// Per isolate, by URL: when a fetch last failed. A burst of tokens during the upstream's outage
// costs one fetch per Retry-After, not one each.
const failedAt = new Map<string, number>();

/** A fetch that did not answer (refused, timed out), or one not tried since the last failed. */
/** A key set's fetch failed (`failure`: the error's class) or was not tried again yet after one. */
class FetchFailed extends Error {
  readonly failure: string;
  constructor(failure: string) {
    super(failure);
    this.failure = failure;
  }
}

function remoteKeys(uri: string): RemoteKeys {
  let keys = remoteSets.get(uri);
  if (!keys) {
    const fetched: Partial<ExportedJWKSCache> = {};
    const set = createRemoteJWKSet(new URL(uri), {
      cacheMaxAge: KEYS_MAX_AGE_MS,
      cooldownDuration: KEYS_REFETCH_MS,
      timeoutDuration: FETCH_TIMEOUT_MS,
      headers: { Accept: "application/jwk-set+json, application/json" },
      [jwksCache]: fetched as JWKSCacheInput,
      [customFetch]: async (url: string, init: RequestInit) => {
        const failed = failedAt.get(uri);
        if (failed !== undefined && Date.now() - failed < UPSTREAM_KEYS_RETRY_SECONDS * 1000)
          throw new FetchFailed("failed_recently");
        try {
          return await fetch(url, init);
        } catch (error) {
          failedAt.set(uri, Date.now());
          throw new FetchFailed(error instanceof Error ? error.name : "error");
        }
      },
    });
    keys = { set, fetched };
    remoteSets.set(uri, keys);
  }
  return keys;
}

/** The upstream's key set; `remote` when fetched from its jwks_uri. */
function keySetOf(upstream: Upstream): { set: KeySet; remote: RemoteKeys | null } {
  if ("jwksUri" in upstream.keys) {
    const remote = remoteKeys(upstream.keys.jwksUri);
    return { set: remote.set, remote };
  }
  let set = inlineSets.get(upstream);
  if (!set) {
    set = createLocalJWKSet({ keys: upstream.keys.jwks as JWK[] });
    inlineSets.set(upstream, set);
  }
  return { set, remote: null };
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
 * encryption). Throws UpstreamKeysUnavailable when its key set cannot be fetched, or cannot be
 * fetched again yet for a `kid` it lacks (the cooldown, above).
 */
export async function upstreamKey(
  upstream: Upstream,
  { header }: Jws,
  token: FlattenedJWSInput,
): Promise<CryptoKey | "unknown" | "unusable"> {
  const { set, remote } = keySetOf(upstream);
  const fetchedBefore = remote?.fetched.uat;
  const named = () => {
    const keys = set.jwks()?.keys ?? [];
    return header.kid === undefined ? keys.length === 1 : keys.some((key) => key.kid === header.kid);
  };
  try {
    const key = await set(header, token);
    return header.kid !== undefined || named() ? key : "unknown";
  } catch (error) {
    if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) {
      if (named()) return "unusable";
      // jose fetched nothing for this token: the set predates it, and the cooldown kept it.
      const uat = remote?.fetched.uat;
      if (
        error instanceof errors.JWKSNoMatchingKey &&
        remote?.set.coolingDown &&
        uat !== undefined &&
        uat === fetchedBefore
      ) {
        const seconds = Math.max(1, Math.ceil((uat + KEYS_REFETCH_MS - Date.now()) / 1000));
        throw new UpstreamKeysUnavailable(upstream.name, "unknown_kid", seconds);
      }
      return "unknown";
    }
    if (error instanceof FetchFailed)
      throw new UpstreamKeysUnavailable(upstream.name, "unavailable", undefined, error.failure);
    if ("jwksUri" in upstream.keys && isUnusableAnswer(error)) {
      failedAt.set(upstream.keys.jwksUri, Date.now());
      throw new UpstreamKeysUnavailable(upstream.name, "unavailable", undefined, (error as Error).name);
    }
    throw error;
  }
}

/** Why an upstream's token is refused before its claims are read, for its route to word. */
export type UpstreamTokenFault = "malformed" | "unknown" | "unusable" | "forged";

/**
 * A compact JWS of the upstream `senderOf` names from its header (which throws its own refusal
 * for none), its signature verified by that upstream's key: the one check of every token an
 * upstream sends, SET, logout token and revocation JWT alike. `refuse` words each fault as its
 * route answers it; any other error (a bug, the keys unavailable) is thrown as it is.
 */
export async function verifiedByUpstream(
  compact: string,
  senderOf: (read: Jws) => Upstream,
  refuse: (fault: UpstreamTokenFault, read: Jws | null) => Refused,
): Promise<{ jws: Jws; upstream: Upstream }> {
  let upstream: Upstream | undefined;
  try {
    const jws = await verifyJws(compact, async (read, token) => {
      upstream = senderOf(read);
      const key = await upstreamKey(upstream, read, token);
      if (key === "unusable" || key === "unknown") throw refuse(key, read);
      return key;
    });
    return { jws: jws as Jws, upstream: upstream as Upstream };
  } catch (error) {
    const fault = tokenFault(error);
    if (fault) throw refuse(fault, null);
    throw error;
  }
}
