import type { Database } from "../../db/client.ts";
import type { SessionEventRow } from "../../db/schema.ts";
import { type DestinedSet, queueSessionSets, type SessionSet } from "../../db/ssf/queue.ts";
import { isHoldReason } from "../../domain/actions.ts";
import { AAL_NAMESPACE, aalName } from "../../domain/auth-factors.ts";
import { isSameDevice } from "../../domain/device.ts";
import type { EventType } from "../../domain/events.ts";
import { SERVICE_REASONS } from "../../domain/reason.ts";
import {
  ASSURANCE_LEVEL_CHANGE,
  RISK_LEVEL_CHANGE,
  SESSION_ESTABLISHED,
  SESSION_REVOKED,
} from "../../domain/ssf/caep.ts";
import { jtiOf } from "../../domain/ssf/streams.ts";
import type { Transmitter } from "../../domain/ssf/transmitter.ts";

// What a SET says: each session event becomes a CAEP SET queued for the streams that take it
// (src/db/ssf/queue.ts), then pushed (src/services/ssf/delivery.ts) or polled. Called by the
// outbox after the answer (src/services/outbox.ts) and by the cron, never in a request's way.
// The SETs for an upstream, in its own ids, are made of the same claims
// (src/services/upstreams/pushed-sets.ts).

type Initiator = "user" | "admin" | "policy" | "system";

/**
 * What each session event is to a receiver: a session established, a session revoked (by
 * whom, and the administrator's reason), the session's assurance level changed (a
 * re-authentication, only when it did change the level), its risk level changed (a context
 * change that held it), or nothing (a device binding, a change only logged).
 */
export const AS_CAEP: Record<EventType, { type: string; by?: Initiator; reason?: string } | null> = {
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
  // Held: the session is as good as another device's until it re-authenticates,
  // which a receiver acts on as a risk (CAEP 1.0 §3.8); assurance-level-change would claim a
  // change of authentication that did not happen. An `end` is an `ended` event, a `log` none.
  context_changed: { type: RISK_LEVEL_CHANGE, by: "policy" },
  // Held by an upstream's event: as a context change's hold, the session is at risk until the
  // user signs in again; only logged, nothing changed.
  held_by_upstream: { type: RISK_LEVEL_CHANGE, by: "system" },
  signaled_by_upstream: null,
  // Held by an admin's call (an organization's sessions, all at once): at risk until the user signs in again.
  held: { type: RISK_LEVEL_CHANGE, by: "admin" },
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
  if (type === "held")
    return { principal: "SESSION", current_level: "HIGH", risk_reason: `An administrator asked (${reason})` };
  if (!isHoldReason(reason)) return null;
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
export function detailsOf(event: SessionEventRow, caep: NonNullable<(typeof AS_CAEP)[EventType]>) {
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

/** A re-authentication that lifted a hold (its reason `hold`) also says the risk fell. */
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
export function setClaims(
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
 * Queues the events' SETs for the streams that take them, and `destined`, the SETs already made
 * for one destination each (the upstreams', src/services/upstreams/pushed-sets.ts), and answers
 * whether any stream is live: one round trip to the streams' database.
 */
export function queueSets(
  streams: Database,
  transmitter: Transmitter,
  events: SessionEventRow[],
  destined: DestinedSet[],
): Promise<boolean> {
  return queueSessionSets(
    streams,
    events.flatMap((event) => sessionSetsOf(event, transmitter.issuer)),
    destined,
  );
}
