import { actOnSessionsForSet, recordJtiFor } from "../../db/upstreams/inbound-sets.ts";
import type { Jws } from "../../domain/jws.ts";
import { tokenIssuerOf, type Upstream, type UpstreamEvent, upstreamReason } from "../../domain/upstreams/config.ts";
import {
  checkIssuer,
  checkRevocationJwt,
  logoutOf,
  revokedSubjectOf,
  type UpstreamEnding,
  type UpstreamErrorCode,
  upstreamRefused,
} from "../../domain/upstreams/logout.ts";
import { type Scope, write } from "../scope.ts";
import { type UpstreamTokenFault, verifiedByUpstream } from "./keys.ts";
import { linkedUser } from "./links.ts";

// An upstream ends sessions here in OpenID Connect's words: a back-channel logout token ends
// the sessions of one of its sessions or subjects; a global token revocation, every session of
// the user its subject is. Each verified by the upstream's keys (src/services/upstreams/keys.ts),
// its `jti` recorded for its subject on the database the `jti` hashes to (so a `jti` acts for
// one subject only, whichever database that subject's user is on), then acted on once, in one
// batch on the user's database, after the subject's link is read.

/** A compact JWS by this upstream, its signature verified; `error` is the refusal's code. */
async function verified(upstream: Upstream, compact: string, what: string, error: UpstreamErrorCode): Promise<Jws> {
  const words: Record<UpstreamTokenFault, (read: Jws | null) => string> = {
    malformed: () => `The ${what} is not a compact JWS signed with ES256 or RS256.`,
    unknown: () => `The ${what}'s kid names no key of its issuer.`,
    unusable: (read) => `The key the ${what} names cannot verify ${read?.alg} signatures.`,
    forged: () => `The ${what}'s signature does not verify with its issuer's key.`,
  };
  const sender = (read: Jws) => {
    checkIssuer(read, upstream, what, error);
    return upstream;
  };
  const { jws } = await verifiedByUpstream(compact, sender, (fault, read) =>
    upstreamRefused(error, words[fault](read)),
  );
  return jws;
}

/**
 * Ends what the upstream asked, once per `jti`, on the database of `user`, the one its subject
 * is linked to. With `allOfUser`, every session of the user; else those signed in through the
 * upstream as the subject (and the sid).
 */
async function end(
  scope: Scope,
  upstream: Upstream,
  ending: UpstreamEnding,
  user: { userId: string; region: string | null },
  event: UpstreamEvent,
  allOfUser: boolean,
): Promise<number> {
  const shard = await scope.shards.forUser(user.userId, user.region);
  const target = {
    userId: user.userId,
    sessionId: null,
    issuedAt: ending.issuedAt,
    organizationId: upstream.organizationId,
    ...(allOfUser ? {} : { upstream: { name: upstream.name, subject: ending.subject, sid: ending.sid } }),
  };
  const set = { issuer: tokenIssuerOf(upstream), jti: ending.jti };
  // The writer is the system, from the upstream's address.
  return write(scope, null, (writer) =>
    actOnSessionsForSet(shard, set, target, "end", upstreamReason(upstream, event), writer, scope.at),
  );
}

const nowSeconds = (scope: Scope) => Math.floor(scope.at.now.getTime() / 1000);

/**
 * The token's first round trip, two batches at once: its `jti` recorded for `subject`, in the
 * bucket `<kind>\n<upstream>\n<jti>` hashes to in the upstream's region (as a link's pair does),
 * and the subject's link read. `recorded`: the record is this subject's. A token sent again for
 * its subject goes on (its endings are remembered on the user's database); one with the same
 * `jti` for another subject does not. `user`: null when no sign-in linked the subject.
 */
async function recordedAndLinked(
  scope: Scope,
  upstream: Upstream,
  kind: "logout" | "revocation",
  jti: string,
  subject: string,
) {
  scope.plannedRoundTrip();
  const shard = await scope.shards.forUser(`${kind}\n${upstream.name}\n${jti}`, upstream.region);
  const token = { issuer: `${kind} ${tokenIssuerOf(upstream)}`, jti };
  const [recorded, user] = await Promise.all([
    recordJtiFor(shard, token, subject, scope.at.now),
    linkedUser(scope, upstream, subject),
  ]);
  return { recorded, user };
}

/** OpenID Connect Back-Channel Logout 1.0 §2.6: the logout token checked and acted on; how many sessions it ended. */
export async function backchannelLogout(scope: Scope, upstream: Upstream, logoutToken: string): Promise<number> {
  const jws = await verified(upstream, logoutToken, "logout token", "invalid_request");
  const ending = logoutOf(jws, upstream, nowSeconds(scope));
  const { recorded, user } = await recordedAndLinked(scope, upstream, "logout", ending.jti, ending.subject);
  // A `jti` used before for another subject: acted on already, as a token sent again is.
  if (!recorded || !user) return 0;
  return end(scope, upstream, ending, user, "backchannel_logout", false);
}

/**
 * Global token revocation (draft -06): the request's JWT (`Authorization: Bearer`) verified,
 * then every session of the user its `sub_id` is ended; null when no sign-in linked the subject.
 */
export async function revokeGlobally(
  scope: Scope,
  upstream: Upstream,
  bearer: string,
  body: unknown,
  url: string,
): Promise<number | null> {
  const jws = await verified(upstream, bearer, "JWT", "invalid_token");
  checkRevocationJwt(jws, url, nowSeconds(scope));
  const subject = revokedSubjectOf(body, upstream);
  const { jti, iat } = jws.payload as { jti: string; iat: number };
  // The JWT names no subject: recorded for this one, so a copy of it cannot end another user's sessions.
  const { recorded, user } = await recordedAndLinked(scope, upstream, "revocation", jti, subject);
  if (!recorded) throw upstreamRefused("invalid_token", "The JWT was used before for another subject.");
  if (!user) return null;
  return end(
    scope,
    upstream,
    { jti, subject, sid: null, issuedAt: new Date(iat * 1000) },
    user,
    "global_revocation",
    true,
  );
}
