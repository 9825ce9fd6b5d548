// What the login flow verified, as stored with a session: each authentication factor and
// when it was completed, and optionally an assurance level. `authenticate` hands them back so
// an app can judge "fresh enough"; step-up (SESSION_STEP_UP_MAX_AGE_SECONDS) judges by the
// latest of them.

import { InvalidInput } from "./invalid-input.ts";

/**
 * The one list of factor names: RFC 8176's `amr` values, and the two names login flows use
 * beyond it (`webauthn` for passkeys and security keys, `sso` for a federated sign-in).
 */
export const AUTH_FACTORS = [
  "face",
  "fpt",
  "geo",
  "hwk",
  "iris",
  "kba",
  "mca",
  "mfa",
  "otp",
  "pin",
  "pwd",
  "rba",
  "retina",
  "sc",
  "sms",
  "swk",
  "tel",
  "user",
  "vbm",
  "wia",
  "webauthn",
  "sso",
] as const;
export type AuthFactor = (typeof AUTH_FACTORS)[number];

/** As stored (`sessions.auth_proofs`): completion time in ms by factor, so a newer proof of a factor replaces the older. */
export type StoredFactors = Partial<Record<AuthFactor, number>>;

/** As given: a factor completed now, or with the time it was completed. */
export type FactorInput = AuthFactor | { factor: AuthFactor; completedAt?: string | number | Date };

/** As returned by `authenticate`: oldest first. */
export interface CompletedFactor {
  factor: AuthFactor;
  completedAt: string;
}

/** NIST SP 800-63B authenticator assurance levels. */
export const ASSURANCE_LEVELS = [1, 2, 3] as const;
export type AssuranceLevel = (typeof ASSURANCE_LEVELS)[number];

/** CAEP 1.0 §3.4's namespace and names for these levels: `nist-aal1` to `nist-aal3`. */
export const AAL_NAMESPACE = "NIST-AAL";
export const aalName = (level: number) => `nist-aal${level}`;

/** The level a CAEP `nist-aal<n>` name stands for (any case); null for any other value. */
export function levelOfAalName(name: unknown): AssuranceLevel | null {
  if (typeof name !== "string") return null;
  return ASSURANCE_LEVELS.find((level) => aalName(level) === name.toLowerCase()) ?? null;
}

const MAX_PROOFS = AUTH_FACTORS.length;
/** A login flow's clock may run a little ahead of the worker's. */
const CLOCK_SKEW_MS = 60_000;

/** The one rule for factors given by the rest of the system; refused as InvalidInput. */
export function checkFactors(input: unknown, now: Date, required: boolean): StoredFactors | null {
  if (input === undefined || input === null) {
    if (required) throw new InvalidInput("factors must list at least one completed authentication factor");
    return null;
  }
  if (!Array.isArray(input) || input.length > MAX_PROOFS || (required && input.length === 0)) {
    throw new InvalidInput(`factors must be an array of 1 to ${MAX_PROOFS} factors`);
  }
  const factors: StoredFactors = {};
  for (const item of input as unknown[]) {
    const { factor, completedAt } =
      typeof item === "string"
        ? { factor: item, completedAt: undefined }
        : typeof item === "object" && item !== null
          ? (item as { factor?: unknown; completedAt?: unknown })
          : {};
    if (!AUTH_FACTORS.includes(factor as AuthFactor)) {
      throw new InvalidInput(`each factor must be one of ${AUTH_FACTORS.join(", ")}`);
    }
    const at = completedAt === undefined ? now.getTime() : new Date(completedAt as string).getTime();
    if (!Number.isFinite(at) || at > now.getTime() + CLOCK_SKEW_MS || at <= 0) {
      throw new InvalidInput("completedAt must be a valid time, not in the future", RangeError);
    }
    const key = factor as AuthFactor;
    factors[key] = Math.max(factors[key] ?? 0, Math.min(at, now.getTime()));
  }
  return factors;
}

export function checkAssuranceLevel(level: unknown): AssuranceLevel | null {
  if (level === undefined || level === null) return null;
  if (!ASSURANCE_LEVELS.includes(level as AssuranceLevel)) {
    throw new InvalidInput("assuranceLevel must be 1, 2 or 3 (NIST SP 800-63B AAL)", RangeError);
  }
  return level as AssuranceLevel;
}

/** A `max_age` (OIDC's, RFC 9470's): a whole number of seconds, 0 or more. */
export function isMaxAge(seconds: unknown): seconds is number {
  return Number.isSafeInteger(seconds) && (seconds as number) >= 0;
}

/** The latest proof: when the user last proved who they are. */
export function latestFactor(factors: StoredFactors | null): number | null {
  const times = Object.values(factors ?? {});
  return times.length > 0 ? Math.max(...times) : null;
}

export function factorList(factors: StoredFactors | null): CompletedFactor[] {
  return Object.entries(factors ?? {})
    .sort(([, a], [, b]) => a - b)
    .map(([factor, at]) => ({ factor: factor as AuthFactor, completedAt: new Date(at).toISOString() }));
}
