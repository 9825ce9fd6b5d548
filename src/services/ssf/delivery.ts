import type { Database } from "../../db/client.ts";
import type { SessionEventRow } from "../../db/schema.ts";
import {
  claimDuePushes,
  type DestinedSet,
  type DuePush,
  queueSessionSets,
  recordPushes,
  type SessionSet,
} from "../../db/ssf/queue.ts";
import { AAL_NAMESPACE, aalName } from "../../domain/auth-factors.ts";
import { isSameDevice } from "../../domain/device.ts";
import type { EventType } from "../../domain/events.ts";
import { logLine } from "../../domain/log.ts";
import { SERVICE_REASONS } from "../../domain/reason.ts";
import {
  ASSURANCE_LEVEL_CHANGE,
  jtiOf,
  RISK_LEVEL_CHANGE,
  SESSION_ESTABLISHED,
  SESSION_REVOKED,
} from "../../domain/ssf/streams.ts";
import { signSet, type Transmitter } from "../../domain/ssf/transmitter.ts";
import type { UpstreamReceiver } from "../../domain/upstreams/receivers.ts";

// Session events as Shared Signals: each becomes a CAEP SET queued for the streams that take it
// (src/db/ssf/queue.ts), then pushed to push streams or polled by the others. Called by the outbox
// after the answer (src/services/outbox.ts) and by the cron, never in a request's way. A
// session signed in through an upstream that takes pushes (src/domain/upstreams/receivers.ts)
// also becomes a SET for that upstream, in its own ids, pushed the same way.

type Initiator = "user" | "admin" | "policy" | "system";

/**
 * What each session event is to a receiver: a session established, a session revoked (by
 * whom, and the administrator's reason), the session's assurance level changed (a
 * re-authentication, only when it did change the level), its risk level changed (a context
 * change that held it for step-up), or nothing (a device binding, a change only logged).
 */
const AS_CAEP: Record<EventType, { type: string; by?: Initiator; reason?: string } | null> = {
  created: { type: SESSION_ESTABLISHED },
  logout: { type: SESSION_REVOKED, by: "user", reason: "The user signed out" },
  deleted: { type: SESSION_REVOKED, by: "user", reason: "The user signed this session out from another" },
  logout_all: { type: SESSION_REVOKED, by: "user", reason: "The user signed out everywhere" },
  logout_others: { type: SESSION_REVOKED, by: "user", reason: "The user signed out everywhere else" },
  ended: { type: SESSION_REVOKED },
  // An upstream identity provider's SET ended it (POST /ssf/inbound): reason `<upstream>:<event>`.
  ended_by_upstream: { type: SESSION_REVOKED, by: "system" },
  evicted: { type: SESSION_REVOKED, by: "policy", reason: "Over the limit of sessions per user" },
  reauthenticated: { type: ASSURANCE_LEVEL_CHANGE, by: "user" },
  device_bound: null,
  // Held for step-up: the session is as good as another device's until it re-authenticates,
  // which a receiver acts on as a risk (CAEP 1.0 §3.8); assurance-level-change would claim a
  // change of authentication that did not happen. An `end` is an `ended` event, a `log` none.
  context_changed: { type: RISK_LEVEL_CHANGE, by: "policy" },
  // Held by an upstream's event: as a context change's hold, the session is at risk until the
  // user signs in again; only logged, nothing changed.
  held_by_upstream: { type: RISK_LEVEL_CHANGE, by: "system" },
  signaled_by_upstream: null,
};

/**
 * An `ended` event's initiator: the operator's default reason is the administrator's act, a
 * report from the new-sign-in message the user's.
 */
function endedBy(reason: string | null): Initiator {
  if (reason === SERVICE_REASONS.reportedByUser) return "user";
  return reason === "admin" ? "admin" : "system";
}

/**
 * The claims of an assurance-level-change, or null when the level did not change or is not
 * known now. A level the session had none of before is a change with no direction.
 */
function levelChangeOf({ assuranceLevel: now, previousAssuranceLevel: before }: SessionEventRow) {
  if (now === null || now === before) return null;
  return {
    namespace: AAL_NAMESPACE,
    current_level: aalName(now),
    ...(before === null
      ? {}
      : { previous_level: aalName(before), change_direction: now > before ? "increase" : "decrease" }),
  };
}

/**
 * The claims of a risk-level-change, or null for a change that was only logged. The risk is
 * the session's: HIGH while it is held (the reason names the kind of change, no value of
 * it), LOW again once a re-authentication lifted the hold.
 */
function riskChangeOf({ type, reason, context }: SessionEventRow) {
  if (type === "held_by_upstream")
    return { principal: "SESSION", current_level: "HIGH", risk_reason: `The identity provider asked (${reason})` };
  if (reason !== "step-up") return null;
  if (type === "reauthenticated")
    return {
      principal: "SESSION",
      current_level: "LOW",
      previous_level: "HIGH",
      risk_reason: "The user signed in again",
    };
  if (context === null) return null;
  const { before, after, travel } = context;
  // The event writes "" (no browser, no OS) as null; the check judged the device by its rule.
  const face = (seen: { browser: string | null; os: string | null }) => ({
    browser: seen.browser ?? "",
    os: seen.os ?? "",
  });
  const device = !isSameDevice(face(before), face(after));
  return {
    principal: "SESSION",
    current_level: "HIGH",
    risk_reason: device
      ? "The session was used from another browser or operating system"
      : travel
        ? "The session was used from too far away to have travelled there since"
        : "The session was used from another network (country and ASN)",
  };
}

/**
 * What a SET of `type` says beyond the time, or null when the event is no such SET. CAEP 1.0
 * has no claim for an actor (RFC 8693 `act` is a token's, not an event's): a support session
 * is named where every CAEP event may carry text, `reason_admin`, and its opening is an
 * administrator's act (`initiating_entity`).
 */
function detailsOf(event: SessionEventRow, caep: NonNullable<(typeof AS_CAEP)[EventType]>) {
  const support = event.supportAgent === null ? "" : `support access by ${event.supportAgent}`;
  if (caep.type === SESSION_REVOKED) {
    // A support session that ended itself was ended by the agent, an administrator, not the user.
    if (support && event.actorSessionId === event.sessionId)
      return { initiating_entity: "admin", reason_admin: { en: `The agent ended ${support}` } };
    const reason = caep.reason ?? event.reason ?? "Ended by the system";
    return {
      initiating_entity: caep.by ?? endedBy(event.reason),
      reason_admin: { en: support ? `${reason} (${support})` : reason },
    };
  }
  if (caep.type === SESSION_ESTABLISHED && support) {
    return { initiating_entity: "admin", reason_admin: { en: `Opened as ${support}` } };
  }
  if (caep.type === ASSURANCE_LEVEL_CHANGE) {
    const change = levelChangeOf(event);
    return change && { ...change, initiating_entity: caep.by };
  }
  if (caep.type === RISK_LEVEL_CHANGE) {
    const change = riskChangeOf(event);
    return change && { ...change, initiating_entity: caep.by };
  }
  return {};
}

/** A re-authentication that lifted a step-up hold (its reason `step-up`) also says the risk fell. */
const RISK_LIFTED = { type: RISK_LEVEL_CHANGE, by: "user" } as const;

/** The SETs a session event becomes: one, none, or for a lifted hold two. */
function sessionSetsOf(event: SessionEventRow, issuer: string): SessionSet[] {
  const sets = [setOf(event, issuer, AS_CAEP[event.type], "")];
  if (event.type === "reauthenticated") sets.push(setOf(event, issuer, RISK_LIFTED, ":risk"));
  return sets.filter((set) => set !== null);
}

/**
 * The SET of `caep` a session event becomes, or null. Its jti is the same whenever the event
 * is sent again; `suffix` tells apart the SETs of one event.
 */
function setOf(
  event: SessionEventRow,
  issuer: string,
  caep: (typeof AS_CAEP)[EventType],
  suffix: string,
): SessionSet | null {
  if (!caep) return null;
  const details = detailsOf(event, caep);
  if (!details) return null;
  const jti = jtiOf(event.createdAt, `${event.requestId}:${event.sessionId}${suffix}`);
  return {
    jti,
    type: caep.type,
    userId: event.userId,
    createdAt: event.createdAt,
    claims: setClaims(jti, event, caep.type, details, {
      format: "complex",
      session: { format: "opaque", id: event.sessionId },
      user: { format: "iss_sub", iss: issuer, sub: event.userId },
    }),
  };
}

/** A SET's claims for a session event, about `subject`, whoever it is sent to. */
function setClaims(
  jti: string,
  event: SessionEventRow,
  type: string,
  details: Record<string, unknown>,
  subject: Record<string, unknown>,
): Record<string, unknown> {
  return {
    jti,
    // The write that caused it: SETs of one request (a sign-out everywhere) share it.
    txn: event.requestId,
    sub_id: subject,
    events: { [type]: { event_timestamp: Math.floor(event.createdAt.getTime() / 1000), ...details } },
  };
}

/**
 * The SET a session event becomes for the upstream it was signed in through, or null: when that
 * upstream takes pushes of the event's type, and did not itself cause the ending, which it
 * would otherwise be told of again: an `ended_by_upstream` of its own (a SET, a back-channel
 * logout or a revocation; the service wrote its reason `<upstream>:<action>`, so a caller's
 * reason that merely reads so is told), or `upstream_relinked` (its sign-in named the subject as
 * another user; the provider's session, perhaps the very one that sign-in used, must not end
 * for it). It names the session by the upstream's own ids: its `sub`, and its `sid` when it gave one;
 * a session-revoked is sent only for a session with a `sid`, since one naming the user alone
 * would end every session of theirs at the upstream.
 */
function upstreamSetOf(event: SessionEventRow, receivers: readonly UpstreamReceiver[]): DestinedSet | null {
  const receiver = receivers.find((candidate) => candidate.upstream.name === event.upstream);
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

/**
 * Queues the events' SETs for the streams that take them and for the upstreams `receivers`
 * that do, and answers whether any stream is live: one round trip to the streams' database.
 */
export function queueSets(
  streams: Database,
  transmitter: Transmitter,
  events: SessionEventRow[],
  receivers: readonly UpstreamReceiver[] = [],
): Promise<boolean> {
  return queueSessionSets(
    streams,
    events.flatMap((event) => sessionSetsOf(event, transmitter.issuer)),
    receivers.length === 0 ? [] : events.map((event) => upstreamSetOf(event, receivers)).filter((set) => set !== null),
  );
}

/** A push is given this long; then it counts as failed and is retried. */
const PUSH_TIMEOUT_MS = 10_000;
/**
 * How long a round holds the SETs it claimed: well past a round's longest life (its pushes run
 * side by side, each cut at PUSH_TIMEOUT_MS), so a live round always records first; a round
 * that died gives its SETs back to the minute cron when it runs out.
 */
export const PUSH_LEASE_MS = 60_000;
/** One round pushes at most this many SETs (each a subrequest). */
export const PUSH_BATCH_SIZE = 50;
const FIRST_RETRY_MS = 30_000;
const LONGEST_RETRY_MS = 3_600_000;

/** Retry after 30 s, then twice as long each time, up to an hour. */
export function retryDelay(attempts: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** attempts, LONGEST_RETRY_MS);
}

export interface PushResult {
  delivered: number;
  refused: number;
  retried: number;
}

/** Where a claimed SET goes: its stream's endpoint, or its upstream's, as configured now. */
function targetOf(set: DuePush, receivers: readonly UpstreamReceiver[]) {
  const receiver = receivers.find((candidate) => candidate.destination === set.streamId);
  if (receiver)
    return { url: receiver.endpointUrl, authorization: receiver.authorization, audience: receiver.audience };
  return {
    url: set.endpointUrl as string,
    authorization: set.authorizationHeader,
    audience: set.audience as string,
  };
}

/**
 * Pushes the due SETs of enabled push streams and of the upstreams `receivers` (RFC 8935), all signed before any is sent:
 * accepted (2xx) or refused for good (4xx but 429) they are forgotten, otherwise (the network,
 * 408, 429, 5xx) tried again after the backoff, counted from the answer. The round claims its SETs as it reads them, so rounds that
 * overlap never push one SET twice. Two round trips to the streams' database, whatever the
 * number of SETs.
 */
export async function pushDue(
  streams: Database,
  transmitter: Transmitter,
  now: Date,
  send: typeof fetch = fetch,
  receivers: readonly UpstreamReceiver[] = [],
): Promise<PushResult> {
  const round = crypto.randomUUID();
  const started = Date.now();
  const due = await claimDuePushes(
    streams,
    round,
    now,
    new Date(now.getTime() + PUSH_LEASE_MS),
    PUSH_BATCH_SIZE,
    receivers.map((receiver) => receiver.destination),
  );
  const result: PushResult = { delivered: 0, refused: 0, retried: 0 };
  if (due.length === 0) return result;
  const done: { streamId: string; jti: string }[] = [];
  const retry: { streamId: string; jti: string; nextAttemptAt: Date }[] = [];
  // Signed and built before any is sent, outside the catch below: neither fails by the network,
  // only by a bug, a broken key or a stored value the Fetch API refuses (an Authorization no
  // header may carry), so it throws out of the round (the caller logs it) and nothing is sent;
  // the SETs come back when the claim lapses, for the next round.
  const signed = await Promise.all(
    due.map(async (set) => {
      const target = targetOf(set, receivers);
      return { set, target, body: await signSet(transmitter, target.audience, set.claims, now) };
    }),
  );
  const pushes = signed.map(({ set, target, body }) => ({
    set,
    request: new Request(target.url, {
      method: "POST",
      headers: {
        "Content-Type": "application/secevent+jwt",
        Accept: "application/json",
        ...(target.authorization === null ? {} : { Authorization: target.authorization }),
      },
      body,
      // A redirect could point anywhere, a private address included: never followed.
      redirect: "manual",
      signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
    }),
  }));
  await Promise.all(
    pushes.map(async ({ set, request }) => {
      let status = 0;
      try {
        const response = await send(request);
        status = response.status;
        await response.body?.cancel();
      } catch (error) {
        // The network or the receiver (unreachable, timed out, reset): retried after the backoff.
        // The error's name only: its message may quote the endpoint, credentials and all.
        logLine("warn", "ssf_push_failed", {
          stream: set.streamId,
          jti: set.jti,
          name: error instanceof Error ? error.name : "error",
        });
      }
      const accepted = status >= 200 && status < 300;
      const refused = status >= 400 && status < 500 && status !== 429 && status !== 408;
      if (accepted || refused) done.push(set);
      else {
        const answeredAt = now.getTime() + (Date.now() - started);
        retry.push({ ...set, nextAttemptAt: new Date(answeredAt + retryDelay(set.attempts)) });
      }
      if (accepted) result.delivered++;
      else if (refused) {
        result.refused++;
        // The receiver's status only: its body may quote the SET.
        logLine("warn", "ssf_push_refused", { stream: set.streamId, jti: set.jti, status });
      } else result.retried++;
    }),
  );
  await recordPushes(streams, round, done, retry);
  return result;
}
