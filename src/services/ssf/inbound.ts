import { endSessionsForSet } from "../../db/ssf/inbound-sets.ts";
import { ConfigError } from "../../domain/config.ts";
import { type Jws, type PublicKey, parseJws, verifyJws } from "../../domain/jws.ts";
import { actionOf, keyOf, SetRefused, senderOf, type Upstream } from "../../domain/ssf/inbound.ts";
import { isUserId } from "../../domain/user-id.ts";
import { type Scope, write } from "../scope.ts";

// An inbound Security Event Token, pushed by an upstream (RFC 8935): read, verified, and acted
// on in one D1 round trip on the database of the user it names. A SET that is refused
// (SetRefused) ends nothing.

/** A fetched key set is used this long; an unknown `kid` fetches again sooner, at most once a minute. */
const KEYS_MAX_AGE_MS = 5 * 60_000;
const KEYS_REFETCH_MS = 60_000;

// Per isolate, by URL: an upstream's key set is fetched once every few minutes, not per SET.
const fetchedKeys = new Map<string, { keys: readonly unknown[]; at: number }>();

async function fetchKeys(upstream: Upstream, uri: string, now: number): Promise<readonly unknown[]> {
  const response = await fetch(uri, { headers: { Accept: "application/jwk-set+json, application/json" } });
  const body: unknown = response.ok ? await response.json().catch(() => null) : null;
  const keys = (body as { keys?: unknown } | null)?.keys;
  // A 500, not a refusal: the SET may be fine, and its transmitter resends it.
  if (!Array.isArray(keys)) throw new Error(`the key set of upstream ${upstream.name} could not be fetched`);
  fetchedKeys.set(uri, { keys, at: now });
  return keys;
}

/** The key the SET names in the upstream's cached key set, fetched when older than its maximum age. */
async function remoteKey(upstream: Upstream, uri: string, jws: Jws): Promise<PublicKey | undefined> {
  const now = Date.now();
  const cached = fetchedKeys.get(uri);
  if (!cached || now - cached.at >= KEYS_MAX_AGE_MS) return keyOf(await fetchKeys(upstream, uri, now), jws);
  const key = keyOf(cached.keys, jws);
  // A kid not seen yet: the upstream may have rotated its keys since they were fetched.
  if (key || now - cached.at < KEYS_REFETCH_MS) return key;
  return keyOf(await fetchKeys(upstream, uri, now), jws);
}

/** The key the SET names, from the upstream's inline key set or its jwks_uri. */
async function keyFor(upstream: Upstream, jws: Jws): Promise<PublicKey> {
  const key =
    "jwks" in upstream.keys ? keyOf(upstream.keys.jwks, jws) : await remoteKey(upstream, upstream.keys.jwksUri, jws);
  if (!key) throw new SetRefused("invalid_key", "The SET's kid names no key of its issuer.");
  return key;
}

/**
 * Verifies a compact JWS as a SET of one of the upstreams and does what it asks; returns how
 * many sessions it ended (0 for an event not acted on, or a SET received before). Throws
 * SetRefused for a SET that is not acceptable.
 */
export async function actOnInboundSet(scope: Scope, upstreams: readonly Upstream[], compact: string): Promise<number> {
  const { shards, at } = scope;
  if (upstreams.some((upstream) => upstream.region !== null && !shards.map.regions.has(upstream.region)))
    throw new ConfigError("SSF_UPSTREAMS: a region must be one of the regions of SHARDS");
  const jws = parseJws(compact);
  if (!jws) throw new SetRefused("invalid_request", "The body is not a compact JWS signed with ES256 or RS256.");
  const upstream = senderOf(jws, upstreams);
  if (!(await verifyJws(jws, await keyFor(upstream, jws))))
    throw new SetRefused("authentication_failed", "The SET's signature does not verify with its issuer's key.");
  const action = actionOf(jws.payload, upstream, Math.floor(at.now.getTime() / 1000));
  if (!action) return 0;
  if (action.userId !== null && !isUserId(action.userId))
    throw new SetRefused("invalid_request", "The subject's user id is not one this service can hold.");
  const place =
    action.userId !== null
      ? await shards.forUser(action.userId, upstream.region)
      : shards.forSession(action.sessionId as string);
  // A session id of a region this deployment does not have: no session of ours.
  if (!place) return 0;
  const set = { issuer: upstream.issuer, jti: action.jti };
  // The writer is the system, from the transmitter's address.
  return write(scope, null, (writer) => endSessionsForSet(place, set, action, action.reason, writer, at));
}
