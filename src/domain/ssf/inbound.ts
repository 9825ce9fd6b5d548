import { ConfigError } from "../config.ts";
import { type Jws, type PublicKey, publicKeyOf } from "../jws.ts";
import { MAX_REASON_LENGTH } from "../reason.ts";
import { placementOf } from "../token.ts";
import { SESSION_REVOKED } from "./streams.ts";

// Inbound SETs (SSF 1.0, RFC 8935 push): upstreams, transmitters such as an identity provider,
// POST Security Event Tokens (RFC 8417) that end sessions here. Which upstreams are trusted, and
// how their subjects name this service's users, is the var SSF_UPSTREAMS
// (docs/shared-signals.md#inbound-sets-from-upstreams); empty, the endpoint is off (404).
//
// What is read here decides everything but the signature (src/services/ssf/inbound.ts
// verifies it with src/domain/jws.ts) and the one batch that acts (src/db/ssf/inbound-sets.ts).

export const INBOUND_PATH = "/ssf/inbound";
export const SET_MEDIA_TYPE = "application/secevent+jwt";
/** A SET is a few hundred bytes to a few KB (an RS256 signature is 342 to 683 characters): far more is not one. */
export const MAX_SET_BYTES = 16_384;
/**
 * A SET is refused once its `iat` is older than this, or further than the skew in the
 * future. So a `jti` need be remembered only this long (plus the skew): a replay after that
 * is refused as too old, never acted on twice.
 */
export const SET_MAX_AGE_SECONDS = 86_400;
export const SET_CLOCK_SKEW_SECONDS = 60;
/** Bounds what the dedupe table stores per SET; real ones are UUIDs or shorter. */
const MAX_JTI_LENGTH = 256;

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

/** A SET refused: answered 400 `{err, description}` (RFC 8935 §2.3); nothing is acted on. */
export class SetRefused extends Error {
  override name = "SetRefused";
  readonly err: SetErrorCode;
  readonly description: string;

  constructor(err: SetErrorCode, description: string) {
    super(description);
    this.err = err;
    this.description = description;
  }
}

const RISC = "https://schemas.openid.net/secevent/risc/event-type/";

/**
 * The events acted on, each by its name (what the security log's reason records) and whether
 * it may end one session only. Every other event type is accepted and ignored.
 */
const ACTING_EVENTS: ReadonlyMap<string, { name: string; oneSession: boolean }> = new Map([
  [SESSION_REVOKED, { name: "session-revoked", oneSession: true }],
  [`${RISC}account-disabled`, { name: "account-disabled", oneSession: false }],
  [`${RISC}account-purged`, { name: "account-purged", oneSession: false }],
  [`${RISC}credential-compromise`, { name: "credential-compromise", oneSession: false }],
  // Deprecated by RISC in favour of CAEP session-revoked; transmitters still send it.
  [`${RISC}sessions-revoked`, { name: "sessions-revoked", oneSession: false }],
]);
const LONGEST_EVENT_NAME = Math.max(...[...ACTING_EVENTS.values()].map((event) => event.name.length));

/** How an upstream's subjects name users: `iss_sub` (the `sub` is the user id) or `opaque` (the `id` is). */
export const SUBJECT_FORMATS = ["iss_sub", "opaque"] as const;
export type SubjectFormat = (typeof SUBJECT_FORMATS)[number];

export interface Upstream {
  /** The `iss` of its SETs, exactly as they carry it. */
  issuer: string;
  /** Short, unique: the security log records `<name>:<event>` as the reason (64 characters at most). */
  name: string;
  /** What every SET's `aud` must contain. */
  audience: string;
  subject: SubjectFormat;
  /** The home region of the accounts it names (SessionService.create's `region`); null: the default. */
  region: string | null;
  /** Its keys inline (a JWK Set's `keys`), or where to fetch them. */
  keys: { jwks: readonly unknown[] } | { jwksUri: string };
}

export interface UpstreamVars {
  SSF_UPSTREAMS?: string;
}

// The reason `<name>:<event>` keeps to the rule of every reason (src/domain/reason.ts).
const MAX_NAME_LENGTH = MAX_REASON_LENGTH - 1 - LONGEST_EVENT_NAME;
const NAME = new RegExp(`^[A-Za-z0-9._-]{1,${MAX_NAME_LENGTH}}$`);
const REGION = /^[a-z]{2}$/;

function upstreamOf(entry: unknown, invalid: (rule: string) => ConfigError): Upstream {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) throw invalid("each entry is an object");
  const { issuer, name, audience, subject, region, jwks, jwks_uri } = entry as Record<string, unknown>;
  if (typeof issuer !== "string" || !URL.canParse(issuer)) throw invalid("issuer is a URL");
  if (typeof name !== "string" || !NAME.test(name))
    throw invalid(`name is 1 to ${MAX_NAME_LENGTH} characters of A-Z a-z 0-9 . _ -`);
  if (typeof audience !== "string" || audience === "") throw invalid("audience is a non-empty string");
  if (!SUBJECT_FORMATS.some((format) => format === subject))
    throw invalid(`subject is one of ${SUBJECT_FORMATS.join(", ")}`);
  if (region !== undefined && !(typeof region === "string" && REGION.test(region)))
    throw invalid("region, when given, is two lowercase letters");
  const inline = (jwks as { keys?: unknown } | undefined)?.keys;
  const uri = typeof jwks_uri === "string" ? URL.parse(jwks_uri) : null;
  if ((jwks === undefined) === (jwks_uri === undefined))
    throw invalid("each entry has exactly one of jwks and jwks_uri");
  if (jwks !== undefined && !(Array.isArray(inline) && inline.length > 0))
    throw invalid('jwks is a JWK Set: {"keys": [...]}');
  if (jwks_uri !== undefined && uri?.protocol !== "https:") throw invalid("jwks_uri is an https URL");
  return {
    issuer,
    name,
    audience,
    subject: subject as SubjectFormat,
    region: (region as string | undefined) ?? null,
    keys: Array.isArray(inline) ? { jwks: inline } : { jwksUri: (uri as URL).href },
  };
}

function parseUpstreams(text: string): Upstream[] {
  const invalid = (rule: string) => new ConfigError(`SSF_UPSTREAMS must be a JSON array of upstreams: ${rule}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid("not JSON");
  }
  if (!Array.isArray(parsed)) throw invalid("not an array");
  const upstreams = parsed.map((entry) => upstreamOf(entry, invalid));
  for (const [index, upstream] of upstreams.entries()) {
    const earlier = upstreams.slice(0, index);
    if (earlier.some((other) => other.issuer === upstream.issuer)) throw invalid("each issuer is listed once");
    if (earlier.some((other) => other.name === upstream.name)) throw invalid("each name is unique");
  }
  return upstreams;
}

// Parsed once per isolate per value (tests run several).
const parsed = new Map<string, Upstream[]>();

/**
 * The upstreams the var lists; empty when it is empty. Throws a ConfigError that names the
 * var and its rule, never a value.
 */
export function readUpstreams(vars: UpstreamVars): Upstream[] {
  const text = vars.SSF_UPSTREAMS ?? "";
  if (text.trim() === "") return [];
  let upstreams = parsed.get(text);
  if (!upstreams) {
    upstreams = parseUpstreams(text);
    parsed.set(text, upstreams);
  }
  return upstreams;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const refused = (err: SetErrorCode, description: string) => new SetRefused(err, description);

/** The JWS's `typ` (RFC 8417 §2.3; a media type may drop its `application/`) and the upstream its `iss` names. */
export function senderOf(jws: Jws, upstreams: readonly Upstream[]): Upstream {
  const typ = typeof jws.header.typ === "string" ? jws.header.typ.toLowerCase() : "";
  if (typ !== "secevent+jwt" && typ !== SET_MEDIA_TYPE)
    throw refused("invalid_request", 'The JWS header typ is not "secevent+jwt".');
  const upstream = upstreams.find((candidate) => candidate.issuer === jws.payload.iss);
  // "this receiver" is this service, in RFC 8935's word; the description is the contract's.
  if (!upstream) throw refused("invalid_issuer", "The SET's iss is not an issuer this receiver trusts.");
  return upstream;
}

/**
 * The key of `keys` (a JWK Set's members) that the JWS's `kid` names, or the only key when
 * it names none; undefined when there is no such key. A key that is there but cannot verify
 * this algorithm (another type, a weak RSA modulus, meant for encryption) is refused.
 */
export function keyOf(keys: readonly unknown[], jws: Jws): PublicKey | undefined {
  const { kid } = jws.header;
  const jwk =
    kid === undefined
      ? keys.length === 1
        ? keys[0]
        : undefined
      : keys.find((key) => isObject(key) && key.kid === kid);
  if (!isObject(jwk)) return undefined;
  const { alg, use } = jwk;
  const key =
    (alg === undefined || alg === jws.alg) && (use === undefined || use === "sig") && publicKeyOf(jwk, jws.alg);
  if (!key) throw refused("invalid_key", `The key the SET names cannot verify ${jws.alg} signatures.`);
  return key;
}

/** What a verified SET asks of this service. */
export interface SetAction {
  jti: string;
  /** The security log's reason: `<upstream name>:<event>`. */
  reason: string;
  /** The user whose sessions end; null when the subject named only a session. */
  userId: string | null;
  /** The one session that ends (of `userId`, when given); null: every session of the user. */
  sessionId: string | null;
}

/** The user a simple subject names in the upstream's format; null when it is in another. */
function userOf(subject: unknown, upstream: Upstream): string | null {
  if (!isObject(subject) || subject.format !== upstream.subject) return null;
  if (subject.format === "iss_sub" && subject.iss !== upstream.issuer)
    throw refused(
      "access_denied",
      "The subject's iss is not the SET's issuer: an upstream speaks for its own users only.",
    );
  const id = subject.format === "iss_sub" ? subject.sub : subject.id;
  return typeof id === "string" ? id : null;
}

/** A session of this service that a subject's `session` member names (`opaque`); null for any other. */
function sessionOf(subject: unknown): string | null {
  if (!isObject(subject) || subject.format !== "opaque" || typeof subject.id !== "string") return null;
  return placementOf(subject.id) ? subject.id : null;
}

/**
 * The signed claims checked (audience, age, `jti`) and read into what to do, or null when
 * no event of the SET is one this service acts on (accepted, ignored). `nowSeconds`: epoch seconds.
 */
export function actionOf(payload: Record<string, unknown>, upstream: Upstream, nowSeconds: number): SetAction | null {
  const { aud, iat, jti, events } = payload;
  const audiences = Array.isArray(aud) ? aud : [aud];
  // The audience this service is known by to the upstream (its `audience`).
  if (!audiences.includes(upstream.audience))
    throw refused("invalid_audience", "The SET's aud does not name this receiver.");
  if (typeof iat !== "number" || !Number.isFinite(iat)) throw refused("invalid_request", "The SET has no numeric iat.");
  if (iat > nowSeconds + SET_CLOCK_SKEW_SECONDS || iat < nowSeconds - SET_MAX_AGE_SECONDS)
    throw refused("invalid_request", "The SET's iat is in the future or more than 24 hours old.");
  if (typeof jti !== "string" || jti === "" || jti.length > MAX_JTI_LENGTH)
    throw refused("invalid_request", `The SET has no jti of 1 to ${MAX_JTI_LENGTH} characters.`);
  if (!isObject(events) || Object.keys(events).length === 0)
    throw refused("invalid_request", "The SET has no events object.");
  // SSF 1.0: one event per SET; more members are other names of the same event. The first acted on decides.
  const uri = Object.keys(events).find((type) => ACTING_EVENTS.has(type));
  if (uri === undefined) return null;
  const event = ACTING_EVENTS.get(uri) as { name: string; oneSession: boolean };
  const body = events[uri];
  if (!isObject(body)) throw refused("invalid_request", "The event's payload is not an object.");
  // SSF 1.0 puts the subject in `sub_id`; transmitters before it, in the event.
  const subject = payload.sub_id ?? body.subject;
  const complex = isObject(subject) && subject.format === "complex";
  const userId = userOf(complex ? subject.user : subject, upstream);
  const sessionId = complex && event.oneSession ? sessionOf(subject.session) : null;
  if (userId === null && sessionId === null)
    throw refused(
      "invalid_request",
      `The subject names no user in this issuer's format (${upstream.subject}) and no session of this service.`,
    );
  return { jti, reason: `${upstream.name}:${event.name}`, userId, sessionId };
}
