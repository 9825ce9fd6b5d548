// Shared Signals streams (SSF 1.0 §8): what a receiver may ask for, checked here once for the
// HTTP entry point, and how a stream is shown back. Plain data in, plain data out; the statements are
// in src/db/ssf/, the routes in src/http/ssf/streams.ts.

import { isPublicHost } from "../ip.ts";
import { Refused } from "../refusal.ts";
import { isUserId } from "../user-id.ts";
import { ASSURANCE_LEVEL_CHANGE, RISK_LEVEL_CHANGE, SESSION_ESTABLISHED, SESSION_REVOKED } from "./caep.ts";

const SSF = "https://schemas.openid.net/secevent/ssf/event-type/";

/** Sent whatever a stream asked for (SSF 1.0 §8.1.4). */
export const VERIFICATION = `${SSF}verification`;

/** The one list of event types a stream can ask for: `events_supported`. */
export const EVENTS_SUPPORTED = [
  SESSION_ESTABLISHED,
  SESSION_REVOKED,
  ASSURANCE_LEVEL_CHANGE,
  RISK_LEVEL_CHANGE,
] as const;

export const DELIVERY_METHODS = ["push", "poll"] as const;
export type DeliveryMethod = (typeof DELIVERY_METHODS)[number];
export const DELIVERY_URNS = { push: "urn:ietf:rfc:8935", poll: "urn:ietf:rfc:8936" } as const satisfies Record<
  DeliveryMethod,
  string
>;

export const STATUSES = ["enabled", "paused", "disabled"] as const;
export type Status = (typeof STATUSES)[number];

/** A receiver may have this many streams; one more is refused (403). */
export const MAX_STREAMS_PER_RECEIVER = 10;
/** A verification sooner than this after the last one is refused (429, SSF 1.0 §8.1.4.2). */
export const MIN_VERIFICATION_INTERVAL_SECONDS = 30;
/** The management API's root (SSF's configuration_endpoint); the other endpoints are under it. */
export const STREAMS_PATH = "/ssf/streams";
/** Where a poll stream's SETs are fetched from: this, then the stream id (unique per stream). */
export const POLL_PATH = "/ssf/streams/poll";

// What a management request may carry: checked here, and what the OpenAPI document states.
export const MAX_STREAM_ID_LENGTH = 64;
export const MAX_EVENT_TYPES = 32;
export const MAX_URI_LENGTH = 256;
export const MAX_DESCRIPTION_LENGTH = 256;
export const MAX_AUTHORIZATION_LENGTH = 1024;
export const MAX_STATE_LENGTH = 256;
export const MAX_STATUS_REASON_LENGTH = 256;

/** Why a request to the stream management API is refused: each an error code of the API (400), with its message. */
export const STREAM_REQUEST_MESSAGES = {
  invalid_request_body: "The request body must be a JSON object whose members this endpoint takes, each valid.",
  invalid_delivery:
    "delivery must be poll (urn:ietf:rfc:8936), or push (urn:ietf:rfc:8935) to an https endpoint_url on a public host.",
  invalid_subject:
    "subject must name a user: iss_sub issued by this transmitter, opaque, or complex with such a user member.",
} as const;
export type StreamRequestCode = keyof typeof STREAM_REQUEST_MESSAGES;

/** What the receiver chooses of a stream (SSF's receiver-supplied properties). */
export interface StreamRequest {
  eventsRequested: string[];
  deliveryMethod: DeliveryMethod;
  /** Push only. */
  endpointUrl: string | null;
  authorizationHeader: string | null;
  description: string | null;
}

/** A stream as stored (src/db/schema.ts ssf_streams), the parts the view and the checks read. */
export interface StoredStream extends StreamRequest {
  id: string;
  eventsDelivered: string[];
  status: Status;
  reason: string | null;
}

type Json = Record<string, unknown>;

function refuse(code: StreamRequestCode = "invalid_request_body"): never {
  throw new Refused(400, { code, message: STREAM_REQUEST_MESSAGES[code] });
}

const isText = (value: unknown, max: number): value is string =>
  typeof value === "string" && value.length > 0 && value.length <= max && !/\p{Cc}/u.test(value);

/** The request body as a JSON object; anything else is refused. */
export function jsonObject(text: string): Json {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    refuse();
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) refuse();
  return parsed as Json;
}

/** The `stream_id` member (or query parameter) every call but create names. */
export function streamIdOf(value: unknown): string {
  return isText(value, MAX_STREAM_ID_LENGTH) ? value : refuse();
}

/** events_delivered: the requested types this transmitter supports, in the order of EVENTS_SUPPORTED. */
export function eventsDelivered(requested: readonly string[]): string[] {
  return EVENTS_SUPPORTED.filter((type) => requested.includes(type));
}

/**
 * A push endpoint_url, or a refusal: `https` to a public host, no credentials or fragment.
 * `allowPrivate` (SSF_ALLOW_PRIVATE_PUSH, for development) also lets http and private hosts through.
 */
export function pushEndpointOf(value: unknown, allowPrivate: boolean): string {
  const url = isText(value, 2048) ? URL.parse(value) : null;
  if (url?.username !== "" || url.password !== "" || url.hash !== "") refuse("invalid_delivery");
  if (allowPrivate)
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : refuse("invalid_delivery");
  if (url.protocol !== "https:" || !isPublicHost(url.hostname)) refuse("invalid_delivery");
  return url.href;
}

/** The `delivery` member: push with its endpoint, or poll (also when absent, SSF 1.0 §8.1.1.1). */
function deliveryOf(
  value: unknown,
  allowPrivate: boolean,
): Pick<StreamRequest, "deliveryMethod" | "endpointUrl" | "authorizationHeader"> {
  if (value === undefined) return { deliveryMethod: "poll", endpointUrl: null, authorizationHeader: null };
  if (typeof value !== "object" || value === null || Array.isArray(value)) refuse("invalid_delivery");
  const { method, endpoint_url, authorization_header } = value as Json;
  if (method === DELIVERY_URNS.poll) return { deliveryMethod: "poll", endpointUrl: null, authorizationHeader: null };
  if (method !== DELIVERY_URNS.push) refuse("invalid_delivery");
  if (authorization_header !== undefined && !isText(authorization_header, MAX_AUTHORIZATION_LENGTH))
    refuse("invalid_delivery");
  return {
    deliveryMethod: "push",
    endpointUrl: pushEndpointOf(endpoint_url, allowPrivate),
    authorizationHeader: authorization_header ?? null,
  };
}

/**
 * The receiver-supplied properties of a create (absent ones take their defaults: every
 * supported event, poll, no description) or of a replace (absent ones are deleted). On an
 * update, `current` supplies whatever the body leaves out.
 */
export function streamRequestOf(body: Json, allowPrivate: boolean, current?: StreamRequest): StreamRequest {
  const { events_requested, delivery, description } = body;
  if (
    events_requested !== undefined &&
    !(
      Array.isArray(events_requested) &&
      events_requested.length <= MAX_EVENT_TYPES &&
      events_requested.every((type) => isText(type, MAX_URI_LENGTH))
    )
  )
    refuse();
  if (description !== undefined && description !== null && !isText(description, MAX_DESCRIPTION_LENGTH)) refuse();
  const keep = current !== undefined;
  return {
    eventsRequested:
      (events_requested as string[] | undefined) ?? (keep ? current.eventsRequested : [...EVENTS_SUPPORTED]),
    ...(delivery === undefined && keep
      ? {
          deliveryMethod: current.deliveryMethod,
          endpointUrl: current.endpointUrl,
          authorizationHeader: current.authorizationHeader,
        }
      : deliveryOf(delivery, allowPrivate)),
    description: (description as string | null | undefined) ?? (keep ? current.description : null),
  };
}

/** SSF's stream configuration, as every management answer shows it. The push authorization is never shown. */
export function streamView(stream: StoredStream, issuer: string, audience: string) {
  return {
    stream_id: stream.id,
    iss: issuer,
    aud: audience,
    events_supported: [...EVENTS_SUPPORTED],
    events_requested: stream.eventsRequested,
    events_delivered: stream.eventsDelivered,
    delivery:
      stream.deliveryMethod === "push"
        ? { method: DELIVERY_URNS.push, endpoint_url: stream.endpointUrl as string }
        : { method: DELIVERY_URNS.poll, endpoint_url: `${issuer}${POLL_PATH}/${stream.id}` },
    ...(stream.description === null ? {} : { description: stream.description }),
    min_verification_interval: MIN_VERIFICATION_INTERVAL_SECONDS,
  };
}

/** A stream's status as the status endpoint answers it (SSF 1.0 §8.1.2): the reason only when there is one. */
export function statusView(stream: Pick<StoredStream, "id" | "status" | "reason">) {
  return { stream_id: stream.id, status: stream.status, ...(stream.reason ? { reason: stream.reason } : {}) };
}

/**
 * On update and replace, transmitter-supplied properties may be sent back but must match what
 * they are (SSF 1.0 §8.1.1.3); `events_delivered` as it was before the change.
 */
export function checkTransmitterProperties(body: Json, shown: ReturnType<typeof streamView>): void {
  for (const name of ["iss", "aud", "events_supported", "events_delivered", "min_verification_interval"] as const) {
    if (body[name] !== undefined && JSON.stringify(body[name]) !== JSON.stringify(shown[name])) refuse();
  }
  const delivery = body.delivery as Json | undefined;
  if (delivery?.method === DELIVERY_URNS.poll && delivery.endpoint_url !== undefined) {
    if (shown.delivery.method !== DELIVERY_URNS.poll || delivery.endpoint_url !== shown.delivery.endpoint_url)
      refuse("invalid_delivery");
  }
}

/** A status update's new status and reason. */
export function statusOf(body: Json): { status: Status; reason: string | null } {
  const { status, reason } = body;
  if (!STATUSES.includes(status as Status)) refuse();
  if (reason !== undefined && reason !== null && !isText(reason, MAX_STATUS_REASON_LENGTH)) refuse();
  return { status: status as Status, reason: (reason as string | null | undefined) ?? null };
}

/** A verification's optional `state`, echoed in its SET. */
export function stateOf(body: Json): string | null {
  const { state } = body;
  if (state === undefined || state === null) return null;
  return isText(state, MAX_STATE_LENGTH) ? state : refuse();
}

/**
 * The user a subject names (RFC 9493): `iss_sub` issued by this transmitter, `opaque`, or a
 * complex subject whose `user` is one of those. Anything else is refused.
 */
export function userOfSubject(subject: unknown, issuer: string): string {
  if (typeof subject !== "object" || subject === null) refuse("invalid_subject");
  const { format, iss, sub, id, user } = subject as Json;
  if (format === "complex" && (user as Json | undefined)?.format !== "complex") return userOfSubject(user, issuer);
  const userId = format === "iss_sub" && iss === issuer ? sub : format === "opaque" ? id : null;
  return isUserId(userId) ? userId : refuse("invalid_subject");
}

/** The most SETs one poll hands out, whatever `maxEvents` asks (RFC 8936 lets the transmitter choose). */
export const MAX_POLL_EVENTS = 100;
const MAX_ACKS = 1000;
const ERROR_CODE = /^[a-z_]{1,64}$/;

export interface PollRequest {
  maxEvents: number;
  /** The jtis acknowledged or refused: either way, no longer to be kept. */
  done: string[];
  /** The refusals' codes (RFC 8935 §2.4), for the log; their descriptions are not kept. */
  errors: { jti: string; err: string }[];
}

/**
 * An RFC 8936 poll. `returnImmediately` is accepted and always honoured: this transmitter
 * does not hold a poll open (a long poll's timeout is the parties' agreement; here it is zero).
 */
export function pollRequestOf(body: Json): PollRequest {
  const { maxEvents, returnImmediately, ack, setErrs } = body;
  if (maxEvents !== undefined && !(Number.isSafeInteger(maxEvents) && (maxEvents as number) >= 0)) refuse();
  if (returnImmediately !== undefined && typeof returnImmediately !== "boolean") refuse();
  if (ack !== undefined && !(Array.isArray(ack) && ack.every((jti) => isText(jti, MAX_URI_LENGTH)))) refuse();
  if (setErrs !== undefined && (typeof setErrs !== "object" || setErrs === null || Array.isArray(setErrs))) refuse();
  const errors = Object.entries((setErrs ?? {}) as Json).map(([jti, error]) => {
    const err = (error as Json | null)?.err;
    if (!isText(jti, MAX_URI_LENGTH) || typeof err !== "string") refuse();
    return { jti, err: ERROR_CODE.test(err) ? err : "other" };
  });
  const done = [...((ack as string[] | undefined) ?? []), ...errors.map((error) => error.jti)];
  if (done.length > MAX_ACKS) refuse();
  return { maxEvents: Math.min((maxEvents as number | undefined) ?? MAX_POLL_EVENTS, MAX_POLL_EVENTS), done, errors };
}

/**
 * A SET's id: the time it was made (base 36, fixed width) then what makes it unique, so a
 * stream's waiting SETs sort by time (src/db/schema.ts ssf_queued_sets).
 */
export function jtiOf(at: Date, unique: string): string {
  return `${at.getTime().toString(36).padStart(9, "0")}-${unique}`;
}

/** The claims of a verification SET (SSF 1.0 §8.1.4.1), all but iss, aud and iat, added when it is signed. */
export function verificationClaims(streamId: string, state: string | null, at: Date) {
  const jti = jtiOf(at, crypto.randomUUID());
  return {
    jti,
    claims: {
      jti,
      sub_id: { format: "opaque", id: streamId },
      events: { [VERIFICATION]: state === null ? {} : { state } },
    },
  };
}
