import { actOnSessionsForSet } from "../../db/ssf/inbound-sets.ts";
import { ConfigError } from "../../domain/config.ts";
import type { Jws } from "../../domain/jws.ts";
import { actionOf, senderOf, setRefused } from "../../domain/ssf/inbound.ts";
import type { Upstream } from "../../domain/upstreams.ts";
import { isUserId } from "../../domain/user-id.ts";
import { type Scope, write } from "../scope.ts";
import { type UpstreamTokenFault, verifiedByUpstream } from "../upstream-keys.ts";

// An inbound Security Event Token, pushed by an upstream (RFC 8935): read, verified, and acted
// on in one D1 round trip on the database of the user it names. A SET that is refused
// (setRefused) ends nothing.

/** A SET's faults, worded as RFC 8935 §2.3 answers them. */
function setFault(fault: UpstreamTokenFault, read: Jws | null) {
  if (fault === "malformed")
    return setRefused("invalid_request", "The body is not a compact JWS signed with ES256 or RS256.");
  if (fault === "unknown") return setRefused("invalid_key", "The SET's kid names no key of its issuer.");
  if (fault === "unusable")
    return setRefused("invalid_key", `The key the SET names cannot verify ${read?.alg} signatures.`);
  return setRefused("authentication_failed", "The SET's signature does not verify with its issuer's key.");
}

/**
 * Verifies a compact JWS as a SET of one of the upstreams and does what it asks; returns how
 * many sessions it reached (0 for an event not acted on, or a SET received before). Throws its
 * refusal (setRefused) for a SET that is not acceptable.
 */
export async function actOnInboundSet(scope: Scope, upstreams: readonly Upstream[], compact: string): Promise<number> {
  const { shards, at } = scope;
  if (upstreams.some((upstream) => upstream.region !== null && !shards.map.regions.has(upstream.region)))
    throw new ConfigError("SSF_UPSTREAMS: a region must be one of the regions of SHARDS");
  const { jws, upstream } = await verifiedByUpstream(compact, (read) => senderOf(read, upstreams), setFault);
  const action = actionOf(jws.payload, upstream, Math.floor(at.now.getTime() / 1000));
  if (!action) return 0;
  if (action.userId !== null && !isUserId(action.userId))
    throw setRefused("invalid_request", "The subject's user id is not one this service can hold.");
  const shard =
    action.userId !== null
      ? await shards.forUser(action.userId, upstream.region)
      : shards.forSession(action.sessionId as string);
  // A session id of a region this deployment does not have: no session of ours.
  if (!shard) return 0;
  const set = { issuer: upstream.issuer, jti: action.jti };
  // The writer is the system, from the transmitter's address.
  return write(scope, null, (writer) => actOnSessionsForSet(shard, set, action, action.act, action.reason, writer, at));
}
