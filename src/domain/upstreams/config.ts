import { ACTIONS, type Action, actionNamed } from "../actions.ts";
import { ASSURANCE_LEVELS, type AssuranceLevel } from "../auth-factors.ts";
import { ConfigError, parsedOnce } from "../config.ts";
import { isHttpsOrLoopback } from "../ip.ts";
import { MAX_REASON_LENGTH } from "../reason.ts";
import { CAEP_EVENTS, type CaepEvent } from "../ssf/caep.ts";

// The upstreams: identity providers the operator trusts to end sessions here, listed in the var
// SSF_UPSTREAMS. One list for every way they speak, so that one name, one issuer and one key set
// serve them all: Shared Signals SETs (src/domain/upstreams/inbound.ts), OpenID Connect back-channel
// logout and global token revocation (src/domain/upstreams/logout.ts). Empty, every such route is
// off (404).

/**
 * What an upstream can ask, by the name the security log's reason records (`<name>:<event>`):
 * the SET events acted on (CAEP's, then RISC's), then the OIDC routes'.
 */
export const UPSTREAM_EVENTS = [
  ...CAEP_EVENTS,
  "account-disabled",
  "account-purged",
  "credential-compromise",
  "sessions-revoked",
  "backchannel_logout",
  "global_revocation",
] as const;
export type UpstreamEvent = (typeof UPSTREAM_EVENTS)[number];

/** The format of an upstream's SET subjects: `iss_sub` (the user is its `sub`) or `opaque` (its `id`). */
export const SUBJECT_FORMATS = ["iss_sub", "opaque"] as const;
export type SubjectFormat = (typeof SUBJECT_FORMATS)[number];

/** What an upstream may be sent back, by the CAEP 1.0 event's name. */
export const PUSHED_EVENTS = ["session-revoked", "session-established"] as const;
export type PushedEvent = (typeof PUSHED_EVENTS)[number];

/**
 * An upstream that takes this service's SETs about the sessions signed in through it (RFC
 * 8935 push): where to, the `aud` they carry, and which events. The Authorization sent with
 * them is not here (the var is not secret): the secret SSF_UPSTREAM_AUTHORIZATIONS holds it
 * (src/domain/upstreams/receivers.ts).
 */
export interface UpstreamPush {
  endpointUrl: string;
  audience: string;
  events: readonly PushedEvent[];
}

/**
 * What this service does with a CAEP event of an upstream is one of the actions
 * (src/domain/actions.ts): a hold reaches the sessions signed in through it, an end or a log the
 * user's sessions.
 */
export type EventAction = Action;

/**
 * Each CAEP event's action unless the upstream's `events` says otherwise. For the three that
 * have a direction (a level down, not compliant, a high risk) it is the action on that
 * direction; the other is only logged (src/domain/upstreams/inbound.ts).
 */
export const DEFAULT_EVENT_ACTIONS: Readonly<Record<CaepEvent, EventAction>> = {
  "session-revoked": "end",
  "token-claims-change": "log",
  "credential-change": "hold",
  "assurance-level-change": "hold",
  "device-compliance-change": "hold",
  // The provider's own sign-ins: nothing here changes with them.
  "session-established": "ignore",
  "session-presented": "ignore",
  "risk-level-change": "hold",
};

/** What an upstream that sends SETs is known by: the `aud` of its SETs, how its subjects name users, and what its CAEP events do. */
export interface UpstreamSets {
  audience: string;
  subject: SubjectFormat;
  /**
   * False (the default): a subject is the upstream's own, the `sub` its sign-ins gave `create`,
   * and names the user it was linked to (src/services/upstreams/links.ts), as its logout does.
   * True: it is this service's user id, for an upstream configured to speak so.
   */
  subjectsAreUserIds: boolean;
  events: Readonly<Record<CaepEvent, EventAction>>;
}

export interface Upstream {
  /**
   * Null: an entry of SSF_UPSTREAMS. Else the organization whose provider it is, registered at
   * runtime (src/services/organizations/providers.ts): it acts on that organization's sessions alone.
   */
  organizationId: string | null;
  /** The `iss` of everything it signs, exactly as it carries it. */
  issuer: string;
  /** Short, unique: the security log records `<name>:<event>` as the reason; `create` names it. */
  name: string;
  /** With SETs: what every SET's `aud` must contain, and how its subjects name users. Null: it sends none. */
  sets: UpstreamSets | null;
  /**
   * With OpenID Connect: this service's client id at the upstream, which its logout tokens'
   * and revocation requests' `aud` must contain. Null: those routes are off for it.
   */
  clientId: string | null;
  /** The home region of the accounts it names (SessionService.create's `region`); null: the default. */
  region: string | null;
  /** Its keys inline (a JWK Set's `keys`), or where to fetch them. */
  keys: { jwks: readonly unknown[] } | { jwksUri: string };
  /** The assurance level (NIST AAL) each of its ID tokens' `acr` values stands for; one not listed: no level. */
  acrLevels: Readonly<Record<string, AssuranceLevel>>;
  /** Where its sessions' sign-ins and sign-outs here are pushed back to; null: nothing is sent to it. */
  push: UpstreamPush | null;
}

export interface UpstreamVars {
  SSF_UPSTREAMS?: string;
}

const LONGEST_EVENT = Math.max(...UPSTREAM_EVENTS.map((event) => event.length));
// The reason `<name>:<event>` keeps to the rule of every reason (src/domain/reason.ts).
export const MAX_UPSTREAM_NAME_LENGTH = MAX_REASON_LENGTH - 1 - LONGEST_EVENT;
const NAME = new RegExp(`^[A-Za-z0-9._-]{1,${MAX_UPSTREAM_NAME_LENGTH}}$`);
const REGION = /^[a-z]{2}$/;

/** Whether `name` is one an upstream may have: what a lookup by name need not ask about otherwise. */
export const isUpstreamName = (name: unknown): name is string => typeof name === "string" && NAME.test(name);

/**
 * What the memory of an upstream's acted-on tokens knows it by (ssf_received_sets.issuer, and
 * the `logout`, `revocation` and `unlinked` records made from it): the var's entry by its issuer,
 * as always; an organization's provider by its name and issuer, so that two organizations
 * trusting one issuer never find, nor block, each other's tokens. No issuer (a URL: its scheme
 * and `:` come first) reads as a name (no `:`) and a space.
 */
export function tokenIssuerOf(upstream: Upstream): string {
  return upstream.organizationId === null ? upstream.issuer : `${upstream.name} ${upstream.issuer}`;
}

/** The security log's reason for what an upstream did. */
export function upstreamReason(upstream: Upstream, event: UpstreamEvent): string {
  return `${upstream.name}:${event}`;
}

/** `acr_levels`: an object from `acr` values to 1, 2 or 3; absent, none. */
function acrLevelsOf(value: unknown, invalid: Invalid): Record<string, AssuranceLevel> {
  if (value === undefined) return {};
  const isLevel = (level: unknown) => ASSURANCE_LEVELS.some((known) => known === level);
  if (!isObject(value) || !Object.values(value).every(isLevel))
    throw invalid("acr_levels, when given, is an object from acr values to 1, 2 or 3");
  return Object.assign(Object.create(null), value);
}

/** The `events` member: each CAEP event it names and its action, over the defaults. */
function eventActionsOf(events: unknown, invalid: Invalid): Record<CaepEvent, EventAction> {
  if (events === undefined) return DEFAULT_EVENT_ACTIONS;
  const rule = `events is an object whose members are CAEP events (${CAEP_EVENTS.join(", ")}), each ${ACTIONS.join(", ")}`;
  if (!isObject(events)) throw invalid(rule);
  const known = (event: string): event is CaepEvent => CAEP_EVENTS.some((name) => name === event);
  const chosen = Object.entries(events).map(([event, value]) => [event, actionNamed(value)] as const);
  if (!chosen.every(([event, action]) => known(event) && action !== null)) throw invalid(rule);
  return { ...DEFAULT_EVENT_ACTIONS, ...Object.fromEntries(chosen) };
}

/**
 * An entry's `push`: `endpoint_url` (https, http only on a loopback host), optionally
 * `audience` (the issuer when absent: the SETs are for the provider itself) and `events` (both
 * when absent).
 */
function pushOf(value: unknown, issuer: string, invalid: Invalid): UpstreamPush | null {
  if (value === undefined) return null;
  const rule = (what: string) => invalid(`push ${what}`);
  if (!isObject(value) || Object.keys(value).some((member) => !["endpoint_url", "audience", "events"].includes(member)))
    throw rule("is an object of endpoint_url and optionally audience and events");
  const { endpoint_url, audience, events } = value;
  const url = typeof endpoint_url === "string" ? URL.parse(endpoint_url) : null;
  if (!(url && isHttpsOrLoopback(url) && url.username === "" && url.password === "" && url.hash === ""))
    throw rule("endpoint_url is an https URL (http only on a loopback host), without credentials or fragment");
  if (audience !== undefined && (typeof audience !== "string" || audience === ""))
    throw rule("audience, when given, is a non-empty string");
  const named = (event: unknown): event is PushedEvent => PUSHED_EVENTS.some((name) => name === event);
  if (
    events !== undefined &&
    !(Array.isArray(events) && events.length > 0 && events.every(named) && new Set(events).size === events.length)
  )
    throw rule(`events, when given, lists some of ${PUSHED_EVENTS.join(", ")}, each once`);
  return {
    endpointUrl: url.href,
    audience: (audience as string | undefined) ?? issuer,
    events: (events as PushedEvent[] | undefined) ?? PUSHED_EVENTS,
  };
}

/** What a broken rule is thrown as: the var's ConfigError, the admin API's InvalidInput. */
export type Invalid = (rule: string) => Error;

/**
 * An entry of SSF_UPSTREAMS, or a provider an organization registers over the admin API: the one
 * validator of both, so a provider is held to the var's every rule. `organizationId`: the
 * registering organization, null for the var's. Each rule's sentence names its member.
 */
export function upstreamOf(entry: unknown, invalid: Invalid, organizationId: string | null = null): Upstream {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) throw invalid("each entry is an object");
  const {
    issuer,
    name,
    audience,
    subject,
    subjects_are_user_ids,
    events,
    client_id,
    region,
    jwks,
    jwks_uri,
    acr_levels,
    push,
  } = entry as Record<string, unknown>;
  if (typeof issuer !== "string" || !URL.canParse(issuer)) throw invalid("issuer is a URL");
  if (!isUpstreamName(name)) throw invalid(`name is 1 to ${MAX_UPSTREAM_NAME_LENGTH} characters of A-Z a-z 0-9 . _ -`);
  if ((audience === undefined) !== (subject === undefined))
    throw invalid("audience and subject come together (an upstream that sends SETs) or not at all");
  if (audience !== undefined && (typeof audience !== "string" || audience === ""))
    throw invalid("audience is a non-empty string");
  if (subject !== undefined && !SUBJECT_FORMATS.some((format) => format === subject))
    throw invalid(`subject is one of ${SUBJECT_FORMATS.join(", ")}`);
  if (events !== undefined && audience === undefined)
    throw invalid("events come with audience and subject (an upstream that sends SETs)");
  if (subjects_are_user_ids !== undefined && (audience === undefined || typeof subjects_are_user_ids !== "boolean"))
    throw invalid("subjects_are_user_ids, when given, is true or false, with audience and subject");
  if (client_id !== undefined && (typeof client_id !== "string" || client_id === ""))
    throw invalid("client_id is a non-empty string");
  if (audience === undefined && client_id === undefined)
    throw invalid("each entry has audience and subject (SETs), client_id (OpenID Connect), or both");
  if (region !== undefined && !(typeof region === "string" && REGION.test(region)))
    throw invalid("region, when given, is two lowercase letters");
  const inline = (jwks as { keys?: unknown } | undefined)?.keys;
  const uri = typeof jwks_uri === "string" ? URL.parse(jwks_uri) : null;
  if ((jwks === undefined) === (jwks_uri === undefined))
    throw invalid("each entry has exactly one of jwks and jwks_uri");
  if (jwks !== undefined && !(Array.isArray(inline) && inline.length > 0))
    throw invalid('jwks is a JWK Set: {"keys": [...]}');
  if (jwks_uri !== undefined && !(uri && isHttpsOrLoopback(uri)))
    throw invalid("jwks_uri is an https URL (http only on a loopback host)");
  return {
    organizationId,
    issuer,
    name,
    sets:
      audience === undefined
        ? null
        : {
            audience: audience as string,
            subject: subject as SubjectFormat,
            subjectsAreUserIds: subjects_are_user_ids === true,
            events: eventActionsOf(events, invalid),
          },
    clientId: (client_id as string | undefined) ?? null,
    region: (region as string | undefined) ?? null,
    keys: Array.isArray(inline) ? { jwks: inline } : { jwksUri: (uri as URL).href },
    acrLevels: acrLevelsOf(acr_levels, invalid),
    push: pushOf(push, issuer, invalid),
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

const upstreamsFrom = parsedOnce(parseUpstreams);
// One empty list, so that what is kept for the list (the upstream receivers) is kept for it too.
const NO_UPSTREAMS: Upstream[] = [];

/**
 * The upstreams the var lists; empty when it is empty. Throws a ConfigError that names the
 * var and its rule, never a value.
 */
export function readUpstreams(vars: UpstreamVars): Upstream[] {
  const text = vars.SSF_UPSTREAMS ?? "";
  return text.trim() === "" ? NO_UPSTREAMS : upstreamsFrom(text);
}

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A token's `aud`, a string or an array of them, as the array. */
export function audienceOf(aud: unknown): unknown[] {
  return Array.isArray(aud) ? aud : [aud];
}

/**
 * An upstream's token is refused once its `iat` is older than this, or further than the skew in
 * the future. So its `jti` need be remembered only this long (plus the skew): a replay after that
 * is refused as too old, never acted on twice.
 */
export const UPSTREAM_TOKEN_MAX_AGE_SECONDS = 86_400;
export const UPSTREAM_CLOCK_SKEW_SECONDS = 60;
/** Bounds what the memory of acted-on tokens stores per token; real ones are UUIDs or shorter. */
export const MAX_JTI_LENGTH = 256;

/**
 * What is wrong with a signed token's times and id, as the end of a sentence about it ("has no
 * numeric iat"), or null: `iat` within the window, `exp` (when present) not passed, `nbf` (when
 * present) reached, each with the skew; a `jti`. One rule for the logout token, the revocation's
 * JWT and the SET alike: RFC 7519 §4.1.5's `nbf` binds any JWT, though RFC 8417 names it not.
 */
export function timesFault(payload: Record<string, unknown>, nowSeconds: number): string | null {
  const { iat, exp, nbf, jti } = payload;
  if (typeof iat !== "number" || !Number.isFinite(iat)) return "has no numeric iat";
  if (iat > nowSeconds + UPSTREAM_CLOCK_SKEW_SECONDS || iat < nowSeconds - UPSTREAM_TOKEN_MAX_AGE_SECONDS)
    return "has an iat in the future or more than 24 hours old";
  if (exp !== undefined && !(typeof exp === "number" && exp > nowSeconds - UPSTREAM_CLOCK_SKEW_SECONDS))
    return "has expired (exp)";
  if (nbf !== undefined && !(typeof nbf === "number" && nbf <= nowSeconds + UPSTREAM_CLOCK_SKEW_SECONDS))
    return "is not valid yet (nbf)";
  if (typeof jti !== "string" || jti === "" || jti.length > MAX_JTI_LENGTH)
    return `has no jti of 1 to ${MAX_JTI_LENGTH} characters`;
  return null;
}
