import { endUpstreamSubjectSessions } from "../../db/sessions.ts";
import type { BucketShard } from "../../db/shards.ts";
import { readLink, settleLink, writeLink } from "../../db/upstreams/links.ts";
import type { ClientContext } from "../../domain/client-context.ts";
import { ConfigError } from "../../domain/config.ts";
import { SERVICE_REASONS } from "../../domain/reason.ts";
import type { Upstream } from "../../domain/upstreams/config.ts";
import { type Scope, write } from "../scope.ts";

// Which user an upstream's subject is. A logout or a revocation names the subject, not the user,
// and the user's database follows from the user alone; so the sign-in links the two, in the
// bucket the pair hashes to (as a user id hashes to its bucket, in the upstream's region), and
// the logout reads the link first: one round trip more than an operation by user, on a
// primary key, with no scan of any database. The sign-in writes it the same way, before the
// session, so a logout that follows the sign-in's answer always finds it.

async function linkShard(scope: Scope, upstream: Upstream, subject: string): Promise<BucketShard> {
  if (upstream.region !== null && !scope.shards.map.regions.has(upstream.region))
    throw new ConfigError("SSF_UPSTREAMS: a region must be one of the regions of SHARDS");
  scope.plannedRoundTrip();
  // A newline is in no upstream name, so no two pairs hash the same text.
  return scope.shards.forUser(`${upstream.name}\n${subject}`, upstream.region);
}

/**
 * Links the upstream's subject to the user (and the region the user's sessions are in). A
 * subject is one person at the upstream: linked before to another user, that user's sessions
 * signed in as the subject end (`ended`, reason `upstream_relinked`, from the new sign-in's IP
 * and with its context), so that every live session signed in as the subject is its linked
 * user's, and the upstream's logout reaches them all; then the link forgets that user. Two
 * round trips more. The link keeps that user until then (src/db/upstreams/links.ts), so a
 * replay of its write or a retry of the sign-in ends them still, and they end once: a second
 * ending finds none live.
 */
export async function linkSubject(
  scope: Scope,
  upstream: Upstream,
  subject: string,
  user: { userId: string; region: string | null },
  signIn: { ipAddress: string | null; context: ClientContext },
): Promise<void> {
  const linkBucket = await linkShard(scope, upstream, subject);
  const link = { upstream: upstream.name, subject, ...user };
  const previous = await writeLink(linkBucket, link);
  if (!previous) return;
  const shard = await scope.shards.forUser(previous.userId, previous.region);
  scope.plannedRoundTrip();
  await write(
    scope,
    null,
    (writer) =>
      endUpstreamSubjectSessions(
        shard,
        previous.userId,
        { upstream: upstream.name, subject, organizationId: upstream.organizationId },
        SERVICE_REASONS.upstreamRelinked,
        writer,
        scope.at,
        signIn.context,
      ),
    signIn.ipAddress,
  );
  scope.plannedRoundTrip();
  await settleLink(linkBucket, link, previous.userId);
}

/**
 * The user the upstream's subject was linked to by a sign-in; null when none was. For its SET
 * (`set`), also null when none was when the SET first came (remembered so: a replay acts on no
 * user linked since).
 */
export async function linkedUser(
  scope: Scope,
  upstream: Upstream,
  subject: string,
  set?: { issuer: string; jti: string },
) {
  const shard = await linkShard(scope, upstream, subject);
  return readLink(shard, upstream.name, subject, set && { ...set, at: scope.at.now });
}
