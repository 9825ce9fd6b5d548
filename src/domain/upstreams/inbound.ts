import { levelOfAalName } from "../auth-factors.ts";
import type { Jws } from "../jws.ts";
import { Refused } from "../refusal.ts";
import { CAEP_EVENTS, type CaepEvent, caepType } from "../ssf/caep.ts";
import { placementOf } from "../token.ts";
import { isUserId } from "../user-id.ts";
import {
  audienceOf,
  type EventAction,
  isObject,
  timesFault,
  type Upstream,
  type UpstreamEvent,
  type UpstreamSets,
  upstreamReason,
} from "./config.ts";
import { isUpstreamId } from "./sign-in.ts";

// Inbound SETs (SSF 1.0, RFC 8935 push): upstreams, transmitters such as an identity provider,
// POST Security Event Tokens (RFC 8417) that end sessions here, or hold them until the user signs
// in again, or are logged on them. Which upstreams are trusted, and
// how their subjects name this service's users, is the var SSF_UPSTREAMS
// (docs/shared-signals.md#inbound-sets-from-upstreams); empty, the endpoint is off (404). A
// provider names a user by its own subject, which the link its sign-in wrote turns into the
// user, as for its logout (src/services/upstreams/links.ts).
//
// What is read here decides everything but the signature (src/services/upstreams/inbound.ts
// verifies it with src/domain/jws.ts) and the one batch that acts (src/db/upstreams/inbound-sets.ts).

export const INBOUND_PATH = "/ssf/inbound";
export const SET_MEDIA_TYPE = "application/secevent+jwt";
/** A SET is a few hundred bytes to a few KB (an RS256 signature is 342 to 683 characters): far more is not one. */
export const MAX_SET_BYTES = 16_384;
/** The RFC 8935 §2.4 error codes an inbound SET is refused with: the type and the OpenAPI document derive from it. */
export const SET_ERROR_CODES = [
  "invalid_request",
  "invalid_key",
  "invalid_issuer",
  "invalid_audience",
  "authentication_failed",
  "access_denied",
] as const;
export type SetErrorCode = (typeof SET_ERROR_CODES)[number];

/**
 * A SET refused: answered 400 `{err, description}` (RFC 8935 §2.3), in English, not the API's
 * `{code, message}`; nothing is acted on. The description is fixed text, never the SET.
 */
export function setRefused(err: SetErrorCode, description: string): Refused {
  return new Refused(400, { err, description }, { "Content-Language": "en" });
}

const RISC = "https://schemas.openid.net/secevent/risc/event-type/";

/**
 * The events read, each by its name (what the security log's reason records), whether it may
 * act on one session only, and whether it is CAEP's (its action the upstream's `events`) or
 * RISC's (it ends every session of the user). Every other event type is accepted and ignored.
 */
type KnownEvent =
  | { name: UpstreamEvent; oneSession: true; caep: CaepEvent }
  | { name: UpstreamEvent; oneSession: false };
const KNOWN_EVENTS: ReadonlyMap<string, KnownEvent> = new Map<string, KnownEvent>([
  ...CAEP_EVENTS.map((name) => [caepType(name), { name, oneSession: true, caep: name }] as const),
  [`${RISC}account-disabled`, { name: "account-disabled", oneSession: false }],
  [`${RISC}account-purged`, { name: "account-purged", oneSession: false }],
  [`${RISC}credential-compromise`, { name: "credential-compromise", oneSession: false }],
  // Deprecated by RISC in favour of CAEP session-revoked; transmitters still send it.
  [`${RISC}sessions-revoked`, { name: "sessions-revoked", oneSession: false }],
]);

/** The JWS's `typ` (RFC 8417 §2.3; a media type may drop its `application/`) and the upstream its `iss` names. */
export function senderOf(jws: Jws, upstreams: readonly Upstream[]): Upstream {
  const typ = typeof jws.header.typ === "string" ? jws.header.typ.toLowerCase() : "";
  if (typ !== "secevent+jwt" && typ !== SET_MEDIA_TYPE)
    throw setRefused("invalid_request", 'The JWS header typ is not "secevent+jwt".');
  const upstream = upstreams.find((candidate) => candidate.sets !== null && candidate.issuer === jws.payload.iss);
  // "this receiver" is this service, in RFC 8935's word; the description is the contract's.
  if (!upstream) throw setRefused("invalid_issuer", "The SET's iss is not an issuer this receiver trusts.");
  return upstream;
}

/** What a SET does to the sessions it reaches: `ignore` is no action. */
export type SetAct = Exclude<EventAction, "ignore">;

/** What a verified SET asks of this service. */
export interface SetAction {
  jti: string;
  act: SetAct;
  /** The security log's reason: `<upstream name>:<event>`. */
  reason: string;
  /**
   * Whose sessions it reaches: the upstream's own subject (its link names the user), or this
   * service's user id (an upstream with `subjects_are_user_ids`); null when the subject named
   * only a session.
   */
  user: { subject: string } | { userId: string } | null;
  /** The one session it reaches (of the user, when given); null: every session of the user. */
  sessionId: string | null;
  /**
   * With a user: the session member's id as the upstream knows the session (its `sid`), which
   * names the session of the user signed in through it with that `sid` too.
   */
  upstreamSid?: { upstream: string; sid: string };
  /**
   * A hold and a log reach only the sessions signed in through the upstream (as its subject,
   * when it named its own): a fresh sign-in there is what lifts the hold. An ending reaches every
   * session of the user, as it always has.
   */
  upstream?: { name: string; subject: string | null; sid: null };
  /** When the SET was issued: a session signed in after it is not one it speaks of. */
  issuedAt: Date;
  /**
   * A hold's instant: the event's `event_timestamp`, or now when it has none (or a later one).
   * Only the provider's sign-in after it (its `auth_time`) lifts the hold.
   */
  heldSince?: Date;
}

/** An assurance level the upstream names: through its `acr_levels`, else CAEP's `nist-aal<n>`. */
function levelOf(name: unknown, upstream: Upstream): number | null {
  if (typeof name === "string" && Object.hasOwn(upstream.acrLevels, name)) return upstream.acrLevels[name] ?? null;
  return levelOfAalName(name);
}

/**
 * Whether a CAEP event says things got worse: a level down (by its `change_direction`, or
 * without one its levels compared), a device not compliant, a high risk. The events without a
 * direction always do.
 */
function isWorse(event: CaepEvent, body: Record<string, unknown>, upstream: Upstream): boolean {
  if (event === "assurance-level-change") {
    if (typeof body.change_direction === "string") return body.change_direction === "decrease";
    const [current, previous] = [levelOf(body.current_level, upstream), levelOf(body.previous_level, upstream)];
    return current !== null && previous !== null && current < previous;
  }
  if (event === "device-compliance-change") return body.current_status === "not-compliant";
  if (event === "risk-level-change")
    return typeof body.current_level === "string" && body.current_level.toUpperCase() === "HIGH";
  return true;
}

/** The upstream's action on a CAEP event; a change that is no worse is only logged. RISC's events end. */
function actOf(event: KnownEvent, body: Record<string, unknown>, upstream: Upstream, sets: UpstreamSets): EventAction {
  if (!event.oneSession) return "end";
  const chosen = sets.events[event.caep];
  return chosen === "ignore" || isWorse(event.caep, body, upstream) ? chosen : "log";
}

/** The user a simple subject names in the upstream's format, as the upstream words it; null when it is in another. */
function userOf(subject: unknown, upstream: Upstream, sets: UpstreamSets): SetAction["user"] {
  if (!isObject(subject) || subject.format !== sets.subject) return null;
  if (subject.format === "iss_sub" && subject.iss !== upstream.issuer)
    throw setRefused(
      "access_denied",
      "The subject's iss is not the SET's issuer: an upstream speaks for its own users only.",
    );
  const id = subject.format === "iss_sub" ? subject.sub : subject.id;
  if (typeof id !== "string") return null;
  if (sets.subjectsAreUserIds) {
    if (!isUserId(id)) throw setRefused("invalid_request", "The subject's user id is not one this service can hold.");
    return { userId: id };
  }
  if (!isUpstreamId(id)) throw setRefused("invalid_request", "The subject is not a subject this service holds.");
  return { subject: id };
}

/** A hold's instant: the event's `event_timestamp` (epoch seconds), never later than now; now without one. */
function heldSinceOf(body: Record<string, unknown>, nowSeconds: number): Date {
  const stamp = body.event_timestamp;
  const seconds =
    typeof stamp === "number" && Number.isFinite(stamp) && stamp > 0 ? Math.min(stamp, nowSeconds) : nowSeconds;
  return new Date(seconds * 1000);
}

/** The id a subject's `session` member (`opaque`) names a session by: this service's, or the upstream's own. */
function sessionIdOf(subject: unknown): string | null {
  return isObject(subject) && subject.format === "opaque" && typeof subject.id === "string" ? subject.id : null;
}

/**
 * The signed claims checked (audience, age, `jti`) and read into what to do, or null when
 * no event of the SET is one this service acts on, or the upstream's action for it is `ignore`
 * (accepted, ignored). `nowSeconds`: epoch seconds.
 */
export function actionOf(payload: Record<string, unknown>, upstream: Upstream, nowSeconds: number): SetAction | null {
  const { aud, events } = payload;
  const { sets } = upstream;
  // The audience this service is known by to the upstream (its `audience`).
  if (sets === null || !audienceOf(aud).includes(sets.audience))
    throw setRefused("invalid_audience", "The SET's aud does not name this receiver.");
  const fault = timesFault(payload, nowSeconds);
  if (fault) throw setRefused("invalid_request", `The SET ${fault}.`);
  const jti = payload.jti as string;
  if (!isObject(events) || Object.keys(events).length === 0)
    throw setRefused("invalid_request", "The SET has no events object.");
  // SSF 1.0: one event per SET; more members are other names of the same event. The first acted on decides.
  const uri = Object.keys(events).find((type) => KNOWN_EVENTS.has(type));
  if (uri === undefined) return null;
  const event = KNOWN_EVENTS.get(uri) as KnownEvent;
  const body = events[uri];
  if (!isObject(body)) throw setRefused("invalid_request", "The event's payload is not an object.");
  const act = actOf(event, body, upstream, sets);
  if (act === "ignore") return null;
  // SSF 1.0 puts the subject in `sub_id`; transmitters before it, in the event.
  const subject = payload.sub_id ?? body.subject;
  const complex = isObject(subject) && subject.format === "complex";
  const user = userOf(complex ? subject.user : subject, upstream, sets);
  const named = complex && event.oneSession ? sessionIdOf(subject.session) : null;
  const sessionId = named !== null && placementOf(named) ? named : null;
  if (user === null && sessionId === null)
    throw setRefused(
      "invalid_request",
      `The subject names no user in this issuer's format (${sets.subject}) and no session of this service.`,
    );
  // An upstream's `sid` is looked for among the user's sessions only: without a user, finding it
  // would take a search of every database.
  const target = {
    user,
    sessionId,
    issuedAt: new Date((payload.iat as number) * 1000),
    ...(user !== null && named !== null ? { upstreamSid: { upstream: upstream.name, sid: named } } : {}),
  };
  const reason = upstreamReason(upstream, event.name);
  if (act === "end") return { jti, act, reason, ...target };
  const through = { name: upstream.name, subject: user !== null && "subject" in user ? user.subject : null, sid: null };
  return {
    jti,
    act,
    reason,
    ...target,
    upstream: through,
    ...(act === "hold" ? { heldSince: heldSinceOf(body, nowSeconds) } : {}),
  };
}
