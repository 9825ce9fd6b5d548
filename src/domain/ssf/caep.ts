// CAEP 1.0's event vocabulary (OpenID Continuous Access Evaluation Profile): its events by name
// and their type URIs. The streams (src/domain/ssf/streams.ts) and the upstreams
// (src/domain/upstreams/) name the events they send and take from here.

const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";

/** The one list of CAEP 1.0's events, by name: what an upstream may send (src/domain/upstreams/config.ts). */
export const CAEP_EVENTS = [
  "session-revoked",
  "token-claims-change",
  "credential-change",
  "assurance-level-change",
  "device-compliance-change",
  "session-established",
  "session-presented",
  "risk-level-change",
] as const;
export type CaepEvent = (typeof CAEP_EVENTS)[number];
/** A CAEP event's type URI. */
export const caepType = (event: CaepEvent) => `${CAEP}${event}`;

export const SESSION_ESTABLISHED = caepType("session-established");
export const SESSION_REVOKED = caepType("session-revoked");
export const ASSURANCE_LEVEL_CHANGE = caepType("assurance-level-change");
export const RISK_LEVEL_CHANGE = caepType("risk-level-change");
