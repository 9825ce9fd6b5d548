import { type AssuranceLevel, AUTH_FACTORS, type AuthFactor, type StoredFactors } from "../auth-factors.ts";
import { MAX_TTL_SECONDS } from "../config.ts";
import { InvalidInput } from "../invalid-input.ts";
import { isObject, UPSTREAM_CLOCK_SKEW_SECONDS, type Upstream } from "./config.ts";

// Where a session came from, when the login flow signed the user in through an identity
// provider (an upstream of SSF_UPSTREAMS): the provider, its `sub` and its session id (`sid`),
// as its ID token gave them. Stored with the session, so that the provider's back-channel
// logout ends exactly its sessions (src/domain/upstreams/logout.ts). With the ID token's
// `session_expiry` (IPSIE SL1), the session never outlives the provider's; its `auth_time`,
// `amr` and `acr` are the sign-in's factors and level, as a local sign-in's are.

/**
 * What `create` and `reauthenticate` take: the provider by its name in SSF_UPSTREAMS, and its ID
 * token's `sub` and `sid`, and, when it has them, its `session_expiry` and `auth_time` (epoch
 * seconds), `acr` and `amr`.
 */
export interface UpstreamSignInInput {
  provider: string;
  subject: string;
  sid?: string | null;
  session_expiry?: number | null;
  auth_time?: number | null;
  acr?: string | null;
  amr?: string[] | null;
}

/** Which limit a session's `expires_at` is: the provider's `session_expiry`, or its own lifetime. */
export type ExpiryLimit = "session_expiry" | "session";

/** What a backend is shown of it (whoami, `authenticate`, the admin API's list). */
export interface UpstreamSignInView {
  provider: string;
  subject: string;
  sid: string | null;
  /** Present only when the provider gave one: its `session_expiry`, which the session never outlives. */
  session_expiry?: string;
  /** With `session_expiry`: `session_expiry` once the session's end is the provider's, else `session`. */
  bound?: ExpiryLimit;
}

/** The sign-in as checked: the session's row takes its expiry, factors and level from it. */
export interface UpstreamSignIn {
  upstream: Upstream;
  subject: string;
  sid: string | null;
  /** The provider's `session_expiry`; null when it gave none. */
  sessionExpiry: Date | null;
  /** When the user signed in there (its `auth_time`); null when it gave none. What lifts its hold. */
  authTime: Date | null;
  /** Its `amr` as factors completed at its `auth_time` (or now); `sso` alone for an `auth_time` without a known method. */
  factors: StoredFactors | null;
  /** Its `acr` through the upstream's `acr_levels`; null when it gave none or one not listed. */
  assuranceLevel: AssuranceLevel | null;
}

/** A subject or a session id: what providers use (UUIDs, `auth0|…`, opaque strings) fits well within. */
export const MAX_UPSTREAM_ID_LENGTH = 255;
const MEMBERS = ["provider", "subject", "sid", "session_expiry", "auth_time", "acr", "amr"];
/** More `amr` values than any provider sends (RFC 8176 lists 20), each at most this long. */
export const MAX_AMR_VALUES = 20;
export const MAX_AMR_LENGTH = 32;
const RFC_8176 = new Set<string>(AUTH_FACTORS.filter((factor) => factor !== "webauthn" && factor !== "sso"));

/** An upstream's subject or session id: 1 to 255 characters, none of them a control character. */
export function isUpstreamId(value: unknown): value is string {
  return (
    typeof value === "string" && value.length > 0 && value.length <= MAX_UPSTREAM_ID_LENGTH && !/\p{Cc}/u.test(value)
  );
}

/** Epoch seconds as a whole number, or null when absent; anything else refused naming the member. */
function epochSeconds(value: unknown, member: string): number | null {
  if (value === undefined || value === null) return null;
  if (!Number.isSafeInteger(value) || (value as number) <= 0)
    throw new InvalidInput(`upstream.${member}, when given, must be a whole number of seconds since the epoch`);
  return value as number;
}

/**
 * The provider's `session_expiry` (ms): after now, and within the longest lifetime any session
 * here may have (MAX_TTL_SECONDS, 400 days): further is no provider's session but a unit mistake
 * (milliseconds) or a forged value, refused rather than silently ignored.
 */
function sessionExpiryOf(value: unknown, nowMs: number): Date | null {
  const seconds = epochSeconds(value, "session_expiry");
  if (seconds === null) return null;
  if (seconds * 1000 <= nowMs || seconds * 1000 > nowMs + MAX_TTL_SECONDS * 1000)
    throw new InvalidInput(
      `upstream.session_expiry must be after now and at most ${MAX_TTL_SECONDS} seconds (400 days) away`,
      RangeError,
    );
  return new Date(seconds * 1000);
}

/** The provider's `auth_time` (ms): not ahead of now beyond the clock skew (then now), nor older than 400 days. */
function authTimeOf(value: unknown, nowMs: number): number | null {
  const seconds = epochSeconds(value, "auth_time");
  if (seconds === null) return null;
  const ms = seconds * 1000;
  if (ms > nowMs + UPSTREAM_CLOCK_SKEW_SECONDS * 1000 || ms < nowMs - MAX_TTL_SECONDS * 1000)
    throw new InvalidInput(
      `upstream.auth_time must not be ahead of now by more than ${UPSTREAM_CLOCK_SKEW_SECONDS} seconds, nor older than ${MAX_TTL_SECONDS} seconds (400 days)`,
      RangeError,
    );
  return Math.min(ms, nowMs);
}

/** The provider's `amr`: the RFC 8176 values among them (each a factor here by the same name); others are its own, kept out. */
function amrOf(value: unknown): AuthFactor[] | null {
  if (value === undefined || value === null) return null;
  const isShort = (item: unknown) =>
    typeof item === "string" && item.length > 0 && item.length <= MAX_AMR_LENGTH && !/\p{Cc}/u.test(item);
  if (!Array.isArray(value) || value.length > MAX_AMR_VALUES || !value.every(isShort))
    throw new InvalidInput(
      `upstream.amr, when given, must be an array of at most ${MAX_AMR_VALUES} strings of 1 to ${MAX_AMR_LENGTH} characters without control characters`,
    );
  return value.filter((method): method is AuthFactor => RFC_8176.has(method));
}

/** The provider's factors: its known methods at its `auth_time` (or now), else `sso` at its `auth_time`. */
function factorsOf(amr: AuthFactor[] | null, authTime: number | null, nowMs: number): StoredFactors | null {
  const methods = amr !== null && amr.length > 0 ? amr : authTime === null ? [] : (["sso"] as const);
  if (methods.length === 0) return null;
  return Object.fromEntries(methods.map((method) => [method, authTime ?? nowMs]));
}

/**
 * The sign-in checked against the configured upstreams at `now`; null when none was given.
 * Throws a InvalidInput naming the rule for anything else: nothing is written.
 */
export function checkUpstreamSignIn(input: unknown, upstreams: readonly Upstream[], now: Date): UpstreamSignIn | null {
  if (input === undefined || input === null) return null;
  if (!isObject(input) || Object.keys(input).some((member) => !MEMBERS.includes(member)))
    throw new InvalidInput(
      "upstream must be an object of provider, subject and optionally sid, session_expiry, auth_time, acr and amr",
    );
  const upstream = upstreams.find((candidate) => candidate.name === input.provider);
  if (!upstream)
    throw new InvalidInput(
      "upstream.provider must be the name of an upstream this deployment lists in SSF_UPSTREAMS, or of an enabled provider of an organization",
    );
  const rule = `of 1 to ${MAX_UPSTREAM_ID_LENGTH} characters without control characters`;
  if (!isUpstreamId(input.subject)) throw new InvalidInput(`upstream.subject must be a string ${rule}`);
  const sid = input.sid ?? null;
  if (sid !== null && !isUpstreamId(sid)) throw new InvalidInput(`upstream.sid, when given, must be a string ${rule}`);
  const acr = input.acr ?? null;
  if (acr !== null && !isUpstreamId(acr)) throw new InvalidInput(`upstream.acr, when given, must be a string ${rule}`);
  const nowMs = now.getTime();
  const sessionExpiry = sessionExpiryOf(input.session_expiry, nowMs);
  const authTime = authTimeOf(input.auth_time, nowMs);
  const factors = factorsOf(amrOf(input.amr), authTime, nowMs);
  const assuranceLevel = acr === null ? null : (upstream.acrLevels[acr] ?? null);
  return {
    upstream,
    subject: input.subject,
    sid,
    sessionExpiry,
    authTime: authTime === null ? null : new Date(authTime),
    factors,
    assuranceLevel,
  };
}

/**
 * The organization a new session is in: that of the provider the user signed in through (an
 * organization's provider), else the one `create` names (null: none). Naming another than its
 * provider's is refused: a provider of one organization never signs a user into another.
 */
export function sessionOrganization(named: string | null, signIn: UpstreamSignIn | null): string | null {
  const providers = signIn?.upstream.organizationId ?? null;
  if (named !== null && providers !== null && named !== providers)
    throw new InvalidInput(
      "organization must be the organization of the provider upstream.provider names, or be omitted",
      RangeError,
    );
  return providers ?? named;
}

/**
 * A re-authentication's sign-in names another provider or subject than the session's own (or
 * the session has none): the provider's fresh sign-in re-establishes its own session, it never
 * moves one to another account. Refused with nothing written.
 */
export function notTheSessionsSignIn(): InvalidInput {
  return new InvalidInput(
    "upstream.provider and upstream.subject must be those the session was signed in through",
    RangeError,
    true,
  );
}

/**
 * A re-authentication of a session its provider holds (a CAEP event) without that provider's
 * sign-in since the event: only a sign-in there lifts the hold, after the event (its
 * `auth_time`, which an ID token carries when the login flow asks with `max_age=0`). Refused
 * with nothing written, the session still held.
 */
export function heldByTheProvider(): InvalidInput {
  return new InvalidInput(
    "the session's identity provider holds it: only upstream, the provider's sign-in with an auth_time after its event, lifts the hold",
    RangeError,
    true,
  );
}

/** Which limit a session's end is: the provider's once `expires_at` reached it (sliding stops there). */
export function expiryLimit(expiresAt: Date, upstreamExpiresAt: Date): ExpiryLimit {
  return expiresAt.getTime() >= upstreamExpiresAt.getTime() ? "session_expiry" : "session";
}

/**
 * The security log's reason on a `created` event, `<upstream>:session_expiry`, when the provider's
 * `session_expiry` is the session's end from the start; null otherwise.
 */
export function createdReason(session: Pick<UpstreamSignInColumns, "upstream" | "upstreamExpiresAt" | "expiresAt">) {
  const { upstream, upstreamExpiresAt, expiresAt } = session;
  return upstream !== null &&
    upstreamExpiresAt !== null &&
    expiryLimit(expiresAt, upstreamExpiresAt) === "session_expiry"
    ? `${upstream}:session_expiry`
    : null;
}

/** A session's columns of its sign-in, and its end, which the view compares with the provider's. */
export interface UpstreamSignInColumns {
  upstream: string | null;
  upstreamSubject: string | null;
  upstreamSid: string | null;
  upstreamExpiresAt: Date | null;
  expiresAt: Date;
}

/** A session's stored sign-in as a backend is shown it; null when it has none. */
export function upstreamSignInView(row: UpstreamSignInColumns): UpstreamSignInView | null {
  if (row.upstream === null) return null;
  const view: UpstreamSignInView = { provider: row.upstream, subject: row.upstreamSubject ?? "", sid: row.upstreamSid };
  if (row.upstreamExpiresAt === null) return view;
  const bound = expiryLimit(row.expiresAt, row.upstreamExpiresAt);
  return { ...view, session_expiry: row.upstreamExpiresAt.toISOString(), bound };
}
