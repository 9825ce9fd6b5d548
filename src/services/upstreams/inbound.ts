import { actOnSessionsForSet } from "../../db/upstreams/inbound-sets.ts";
import { ConfigError } from "../../domain/config.ts";
import type { Jws } from "../../domain/jws.ts";
import { tokenIssuerOf, type Upstream } from "../../domain/upstreams/config.ts";
import { actionOf, type SetAction, senderOf, setRefused } from "../../domain/upstreams/inbound.ts";
import { type Scope, write } from "../scope.ts";
import { type UpstreamTokenFault, verifiedByUpstream } from "./keys.ts";
import { linkedUser } from "./links.ts";

// An inbound Security Event Token, pushed by an upstream (RFC 8935): read, verified, and acted
// on in one D1 round trip on the database of the user it names, after one that reads the link
// when it names the user by the upstream's own subject. A SET that is refused (setRefused) ends nothing.

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
 * The user a SET's subject names, and the region of its database: through the link the
 * upstream's sign-in wrote for its own subject (one round trip), or this service's user id as
 * it is. Null when it names none, or a subject no sign-in linked (then, or when the SET first came).
 */
async function userOf(scope: Scope, upstream: Upstream, action: SetAction) {
  const named = action.user;
  if (named === null) return null;
  if ("userId" in named) return { userId: named.userId, region: upstream.region };
  return linkedUser(scope, upstream, named.subject, { issuer: tokenIssuerOf(upstream), jti: action.jti });
}

/**
 * Verifies a compact JWS as a SET of one of the upstreams and does what it asks; returns how
 * many sessions it reached (0 for an event not acted on, a subject with no session here, or a
 * SET received before). Throws its refusal (setRefused) for a SET that is not acceptable.
 */
export async function actOnInboundSet(scope: Scope, upstreams: readonly Upstream[], compact: string): Promise<number> {
  const { shards, at } = scope;
  if (upstreams.some((upstream) => upstream.region !== null && !shards.map.regions.has(upstream.region)))
    throw new ConfigError("SSF_UPSTREAMS: a region must be one of the regions of SHARDS");
  const { jws, upstream } = await verifiedByUpstream(compact, (read) => senderOf(read, upstreams), setFault);
  const action = actionOf(jws.payload, upstream, Math.floor(at.now.getTime() / 1000));
  if (!action) return 0;
  const user = await userOf(scope, upstream, action);
  if (action.user !== null && user === null) return 0;
  const shard =
    user !== null ? await shards.forUser(user.userId, user.region) : shards.forSession(action.sessionId as string);
  // A session id of a region this deployment does not have: no session of ours.
  if (!shard) return 0;
  const set = { issuer: tokenIssuerOf(upstream), jti: action.jti };
  const target = { ...action, userId: user?.userId ?? null, organizationId: upstream.organizationId };
  // The writer is the system, from the transmitter's address.
  return write(scope, null, (writer) => actOnSessionsForSet(shard, set, target, action.act, action.reason, writer, at));
}
