import { ACTIONS, policyNamed } from "./actions.ts";
import {
  CONTEXT_KINDS,
  type ContextKind,
  type ContextPolicies,
  type ContextPolicy,
  DEFAULT_CONTEXT_POLICIES,
  DEFAULT_TRAVEL_LIMITS,
  type TravelLimits,
} from "./client-context.ts";

// Every var the worker reads, parsed from the bindings once per bindings object: the runtime hands
// every request of an isolate the same one, and this parsing was a tenth of a list's CPU. Kept per
// object, not only the last (`parsedOnce`), so that requests, RPC calls and the cron never
// re-parse it in turn, whichever objects the runtime hands each.

export interface Config {
  cookieName: string;
  ttlSeconds: number;
  /** 0: sessions never expire from inactivity. */
  idleTimeoutSeconds: number;
  eventRetentionDays: number;
  allowedOrigins: ReadonlySet<string>;
  /** Live sessions a user may hold; issuing one more ends the least recently active. */
  maxPerUser: number;
  /** Authenticated use renews a session's expiry to now + its TTL. */
  slidingTtl: boolean;
  /** No session outlives its creation by more than this, renewed or not. */
  maxLifetimeSeconds: number;
  /**
   * Step-up: ending another session requires a proof at most this old (0: off). The caller's
   * own logout and log-out-everywhere never do.
   */
  stepUpMaxAgeSeconds: number;
  /** How long a device-bound session's bound cookie lives; the browser renews it with a proof. */
  boundCookieSeconds: number;
  /** What a change of device, network or place does to a session that is not device-bound (src/domain/client-context.ts). */
  contextPolicies: ContextPolicies;
  /** How fast and how far a move must be to be travel. */
  travelLimits: TravelLimits;
  /** The longest a support session may live (src/domain/support.ts); it never slides. */
  supportMaxSeconds: number;
  /** How long a new device's report token (src/services/report.ts) works after its sign-in. */
  reportTtlSeconds: number;
}

/** The rules a session's cookie lasts by (src/services/login-response.ts): the vars', or a member's organization's. */
export type Lifetime = Pick<Config, "slidingTtl" | "maxLifetimeSeconds">;

export type ConfigVars = Pick<
  Env,
  | "SESSION_COOKIE_NAME"
  | "SESSION_TTL_SECONDS"
  | "SESSION_IDLE_TIMEOUT_SECONDS"
  | "SESSION_EVENTS_RETENTION_DAYS"
  | "ALLOWED_ORIGINS"
  | "SESSION_MAX_PER_USER"
  | "SESSION_SLIDING_TTL"
  | "SESSION_MAX_LIFETIME_SECONDS"
  | "SESSION_STEP_UP_MAX_AGE_SECONDS"
  | "SESSION_BOUND_COOKIE_SECONDS"
  | `SESSION_CONTEXT_${Uppercase<ContextKind>}`
  | "SESSION_TRAVEL_MAX_KMH"
  | "SESSION_TRAVEL_MIN_KM"
  | "SESSION_SUPPORT_MAX_SECONDS"
  | "SESSION_REPORT_TTL_SECONDS"
>;

/**
 * A configuration the worker refuses to serve with. Every request then answers 500 and logs
 * the message, which names only the var and its rule (never a value that could be secret).
 */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * `parse`, kept for the values it was last called with (compared one by one, by identity): vars
 * are read on every request and change only with a deploy, or between tests. A parse that throws
 * keeps nothing, so a refused configuration is refused again, with its log line, on every call.
 */
export function parsedOnce<Values extends unknown[], T>(parse: (...values: Values) => T): (...values: Values) => T {
  let last: { values: Values; parsed: T } | null = null;
  return (...values) => {
    if (last?.values.every((value, i) => value === values[i])) return last.parsed;
    const parsed = parse(...values);
    last = { values, parsed };
    return parsed;
  };
}

// `__Host-` makes browsers refuse the cookie unless it is Secure, Path=/ and host-only, so
// no subdomain or plain-HTTP page can set or overwrite a session cookie. Without it the
// cookie would be weaker than documented: refused, not served.
const COOKIE_PREFIX = "__Host-";
const COOKIE_NAME = /^__Host-[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Support access is time-boxed: no deployment may let one outlive a working day. */
export const MAX_SUPPORT_SECONDS = 24 * 60 * 60;

/** Browsers keep a cookie at most 400 days (RFC 6265bis), so no session may outlive that. */
export const MAX_TTL_SECONDS = 400 * 24 * 60 * 60;

/**
 * The bounds of each whole-number session setting: one rule, which the var is parsed by and an
 * organization's policy (src/domain/organizations/policy.ts) is checked by.
 */
export const WHOLE_NUMBER_RULES = {
  SESSION_TTL_SECONDS: { min: 1 },
  SESSION_MAX_LIFETIME_SECONDS: { min: 1, max: MAX_TTL_SECONDS },
  SESSION_IDLE_TIMEOUT_SECONDS: { min: 0 },
  SESSION_MAX_PER_USER: { min: 1 },
  SESSION_STEP_UP_MAX_AGE_SECONDS: { min: 0 },
  SESSION_TRAVEL_MAX_KMH: { min: 1 },
  SESSION_TRAVEL_MIN_KM: { min: 0 },
  SESSION_REPORT_TTL_SECONDS: { min: 60 },
  SESSION_BOUND_COOKIE_SECONDS: { min: 10, max: MAX_TTL_SECONDS },
  SESSION_SUPPORT_MAX_SECONDS: { min: 60, max: MAX_SUPPORT_SECONDS },
  SESSION_EVENTS_RETENTION_DAYS: { min: 1 },
} as const satisfies Record<string, { min: number; max?: number }>;

export type WholeNumberSetting = keyof typeof WHOLE_NUMBER_RULES;

/** What is wrong with `value` as `setting`'s value, named `name`; null: nothing. */
export function wholeNumberFault(name: string, setting: WholeNumberSetting, value: unknown): string | null {
  const rule: { min: number; max?: number } = WHOLE_NUMBER_RULES[setting];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < rule.min)
    return `${name} must be an integer >= ${rule.min}`;
  if (rule.max !== undefined && value > rule.max) return `${name} must be <= ${rule.max}`;
  return null;
}

function wholeNumber(name: WholeNumberSetting, value: string | undefined, fallback: number): number {
  const parsed = value === undefined || value === "" ? fallback : Number(value);
  const fault = wholeNumberFault(name, name, parsed);
  if (fault) throw new ConfigError(fault);
  return parsed;
}

/** `https://app.example/` and `https://app.example` name the same origin; a browser sends the latter. */
function toOrigin(value: string): string {
  const origin = URL.parse(value)?.origin;
  if (!origin || origin === "null") throw new ConfigError(`ALLOWED_ORIGINS: ${value} is not an http(s) origin`);
  return origin;
}

function flag(name: string, value: string | undefined): boolean {
  if (value === undefined || value === "" || value === "false") return false;
  if (value === "true") return true;
  throw new ConfigError(`${name} must be "true" or "false"`);
}

function policy(name: string, value: string | undefined, fallback: ContextPolicy): ContextPolicy {
  if (value === undefined || value === "") return fallback;
  const action = policyNamed(value);
  if (action === null) throw new ConfigError(`${name} must be one of ${ACTIONS.join(", ")}`);
  return action;
}

const configs = new WeakMap<ConfigVars, Config>();

export function readConfig(vars: ConfigVars): Config {
  let config = configs.get(vars);
  if (!config) {
    config = parseConfig(vars);
    configs.set(vars, config);
  }
  return config;
}

function parseConfig(vars: ConfigVars): Config {
  const cookieName = vars.SESSION_COOKIE_NAME || "__Host-session";
  if (!COOKIE_NAME.test(cookieName)) {
    throw new ConfigError(`SESSION_COOKIE_NAME must be a cookie name starting with ${COOKIE_PREFIX}`);
  }
  const ttlSeconds = wholeNumber("SESSION_TTL_SECONDS", vars.SESSION_TTL_SECONDS, 2_592_000);
  const maxLifetimeSeconds = wholeNumber(
    "SESSION_MAX_LIFETIME_SECONDS",
    vars.SESSION_MAX_LIFETIME_SECONDS,
    MAX_TTL_SECONDS,
  );
  if (ttlSeconds > maxLifetimeSeconds)
    throw new ConfigError("SESSION_TTL_SECONDS must be <= SESSION_MAX_LIFETIME_SECONDS");
  // A cookie's Max-Age is capped as a session is: hono's cookie helpers refuse to write more.
  const boundCookieSeconds = wholeNumber("SESSION_BOUND_COOKIE_SECONDS", vars.SESSION_BOUND_COOKIE_SECONDS, 600);
  const supportMaxSeconds = wholeNumber("SESSION_SUPPORT_MAX_SECONDS", vars.SESSION_SUPPORT_MAX_SECONDS, 3600);
  const eventRetentionDays = wholeNumber("SESSION_EVENTS_RETENTION_DAYS", vars.SESSION_EVENTS_RETENTION_DAYS, 90);
  const reportTtlSeconds = wholeNumber("SESSION_REPORT_TTL_SECONDS", vars.SESSION_REPORT_TTL_SECONDS, 86_400);
  // A used token is told apart from an unknown one by its sign-in's `created` event: it must outlive the token.
  if (reportTtlSeconds > eventRetentionDays * 86_400)
    throw new ConfigError("SESSION_REPORT_TTL_SECONDS must be <= SESSION_EVENTS_RETENTION_DAYS in seconds");
  return {
    cookieName,
    ttlSeconds,
    maxLifetimeSeconds,
    maxPerUser: wholeNumber("SESSION_MAX_PER_USER", vars.SESSION_MAX_PER_USER, 50),
    slidingTtl: flag("SESSION_SLIDING_TTL", vars.SESSION_SLIDING_TTL),
    idleTimeoutSeconds: wholeNumber("SESSION_IDLE_TIMEOUT_SECONDS", vars.SESSION_IDLE_TIMEOUT_SECONDS, 1_209_600),
    eventRetentionDays,
    reportTtlSeconds,
    stepUpMaxAgeSeconds: wholeNumber("SESSION_STEP_UP_MAX_AGE_SECONDS", vars.SESSION_STEP_UP_MAX_AGE_SECONDS, 0),
    boundCookieSeconds,
    // Never past the lifetime every session is held to: a short SESSION_MAX_LIFETIME_SECONDS caps it.
    supportMaxSeconds: Math.min(supportMaxSeconds, maxLifetimeSeconds),
    contextPolicies: Object.fromEntries(
      CONTEXT_KINDS.map((kind) => {
        const name = `SESSION_CONTEXT_${kind.toUpperCase() as Uppercase<ContextKind>}` as const;
        return [kind, policy(name, vars[name], DEFAULT_CONTEXT_POLICIES[kind])];
      }),
    ) as ContextPolicies,
    travelLimits: {
      maxKmh: wholeNumber("SESSION_TRAVEL_MAX_KMH", vars.SESSION_TRAVEL_MAX_KMH, DEFAULT_TRAVEL_LIMITS.maxKmh),
      minKm: wholeNumber("SESSION_TRAVEL_MIN_KM", vars.SESSION_TRAVEL_MIN_KM, DEFAULT_TRAVEL_LIMITS.minKm),
    },
    allowedOrigins: new Set(
      (vars.ALLOWED_ORIGINS ?? "")
        .split(",")
        .map((origin) => origin.trim())
        .filter(Boolean)
        .map(toOrigin),
    ),
  };
}
