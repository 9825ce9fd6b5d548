import type { SessionEventRow } from "../../db/schema.ts";
import type { DestinedSet } from "../../db/ssf/queue.ts";
import { SERVICE_REASONS } from "../../domain/reason.ts";
import { SESSION_REVOKED } from "../../domain/ssf/caep.ts";
import { jtiOf } from "../../domain/ssf/streams.ts";
import type { UpstreamReceiver } from "../../domain/upstreams/receivers.ts";
import { AS_CAEP, detailsOf, setClaims } from "../ssf/session-sets.ts";

// Sign-ins and sign-outs sent back: a session signed in through an upstream that takes pushes
// (src/domain/upstreams/receivers.ts) also becomes a SET for that upstream, in its own ids,
// queued beside the streams' and pushed the same way (src/services/ssf/delivery.ts).

/**
 * The SET a session event becomes for the upstream it was signed in through, or null: when that
 * upstream takes pushes of the event's type, and did not itself cause the ending, which it
 * would otherwise be told of again: an `ended_by_upstream` of its own (a SET, a back-channel
 * logout or a revocation; the service wrote its reason `<upstream>:<event>`, so a caller's
 * reason that merely reads so is told), or `upstream_relinked` (its sign-in named the subject as
 * another user; the provider's session, perhaps the very one that sign-in used, must not end
 * for it). It names the session by the upstream's own ids: its `sub`, and its `sid` when it gave one;
 * a session-revoked is sent only for a session with a `sid`, since one naming the user alone
 * would end every session of theirs at the upstream.
 */
function upstreamSetOf(event: SessionEventRow, receivers: readonly UpstreamReceiver[]): DestinedSet | null {
  // An organization's provider is told of its own organization's sessions alone, whatever a name reused says.
  const receiver = receivers.find(
    ({ upstream }) =>
      upstream.name === event.upstream &&
      (upstream.organizationId === null || upstream.organizationId === event.organizationId),
  );
  const caep = AS_CAEP[event.type];
  if (!receiver || event.upstreamSubject === null || !caep || !receiver.events.includes(caep.type)) return null;
  const causedByIt =
    (event.type === "ended_by_upstream" && event.reason?.startsWith(`${receiver.upstream.name}:`)) ||
    (event.type === "ended" && event.reason === SERVICE_REASONS.upstreamRelinked);
  if (causedByIt) return null;
  // Without its `sid`, a session-revoked would name the user alone: every session of theirs there.
  if (caep.type === SESSION_REVOKED && event.upstreamSid === null) return null;
  const details = detailsOf(event, caep);
  if (!details) return null;
  const jti = jtiOf(event.createdAt, `${event.requestId}:${event.sessionId}:upstream`);
  return {
    destination: receiver.destination,
    jti,
    createdAt: event.createdAt,
    claims: setClaims(jti, event, caep.type, details, {
      format: "complex",
      user: { format: "iss_sub", iss: receiver.upstream.issuer, sub: event.upstreamSubject },
      ...(event.upstreamSid === null ? {} : { session: { format: "opaque", id: event.upstreamSid } }),
    }),
  };
}

/** The SETs the events become for the upstreams `receivers` that take them. */
export function upstreamSetsOf(events: SessionEventRow[], receivers: readonly UpstreamReceiver[]): DestinedSet[] {
  return receivers.length === 0
    ? []
    : events.map((event) => upstreamSetOf(event, receivers)).filter((set) => set !== null);
}
