import { ACTIONS, actionNamed } from "../actions.ts";
import type { ContextPolicies, ContextPolicy, TravelLimits } from "../client-context.ts";
import { type Config, MAX_TTL_SECONDS, type WholeNumberSetting, wholeNumberFault } from "../config.ts";
import { InvalidInput } from "../invalid-input.ts";

// An organization's session policy (docs/organization-policy.md): each session setting a var
// holds, set for the organization's members, or null for the var's value. Checked by the var's
// own rule (src/domain/config.ts `WHOLE_NUMBER_RULES`), its cross-field rules against the values
// that will apply, so a policy never says what a deployment would refuse to start with.

/** The whole-number settings, each with the var whose rule and default it takes. */
const WHOLE_NUMBERS = {
  ttlSeconds: "SESSION_TTL_SECONDS",
  idleTimeoutSeconds: "SESSION_IDLE_TIMEOUT_SECONDS",
  maxLifetimeSeconds: "SESSION_MAX_LIFETIME_SECONDS",
  maxPerUser: "SESSION_MAX_PER_USER",
  stepUpMaxAgeSeconds: "SESSION_STEP_UP_MAX_AGE_SECONDS",
  travelMaxKmh: "SESSION_TRAVEL_MAX_KMH",
  travelMinKm: "SESSION_TRAVEL_MIN_KM",
  reportTtlSeconds: "SESSION_REPORT_TTL_SECONDS",
} as const satisfies Record<string, WholeNumberSetting>;

/** The context settings, each with its var (SESSION_CONTEXT_<KIND>). */
const CONTEXT = {
  contextDevice: "device",
  contextNetwork: "network",
  contextTravel: "travel",
} as const satisfies Record<string, keyof ContextPolicies>;

/** An organization's policy as stored and answered: null, the var's value. */
export type OrganizationPolicy = { -readonly [K in keyof typeof WHOLE_NUMBERS]: number | null } & {
  -readonly [K in keyof typeof CONTEXT]: ContextPolicy | null;
} & { slidingTtl: boolean | null };

/** The members of a policy, in the order the document lists them. */
export const POLICY_MEMBERS = [
  "ttlSeconds",
  "idleTimeoutSeconds",
  "slidingTtl",
  "maxLifetimeSeconds",
  "maxPerUser",
  "stepUpMaxAgeSeconds",
  "contextDevice",
  "contextNetwork",
  "contextTravel",
  "travelMaxKmh",
  "travelMinKm",
  "reportTtlSeconds",
] as const satisfies readonly (keyof OrganizationPolicy)[];

/** The settings that apply to a member's session: the policy's, else the var's. */
export interface EffectivePolicy {
  ttlSeconds: number;
  idleTimeoutSeconds: number;
  slidingTtl: boolean;
  maxLifetimeSeconds: number;
  maxPerUser: number;
  stepUpMaxAgeSeconds: number;
  contextPolicies: ContextPolicies;
  travelLimits: TravelLimits;
  reportTtlSeconds: number;
}

export function effectivePolicy(policy: OrganizationPolicy, config: Config): EffectivePolicy {
  return {
    ttlSeconds: policy.ttlSeconds ?? config.ttlSeconds,
    idleTimeoutSeconds: policy.idleTimeoutSeconds ?? config.idleTimeoutSeconds,
    slidingTtl: policy.slidingTtl ?? config.slidingTtl,
    maxLifetimeSeconds: policy.maxLifetimeSeconds ?? config.maxLifetimeSeconds,
    maxPerUser: policy.maxPerUser ?? config.maxPerUser,
    stepUpMaxAgeSeconds: policy.stepUpMaxAgeSeconds ?? config.stepUpMaxAgeSeconds,
    contextPolicies: {
      device: policy.contextDevice ?? config.contextPolicies.device,
      network: policy.contextNetwork ?? config.contextPolicies.network,
      travel: policy.contextTravel ?? config.contextPolicies.travel,
    },
    travelLimits: {
      maxKmh: policy.travelMaxKmh ?? config.travelLimits.maxKmh,
      minKm: policy.travelMinKm ?? config.travelLimits.minKm,
    },
    reportTtlSeconds: policy.reportTtlSeconds ?? config.reportTtlSeconds,
  };
}

/**
 * A policy as sent (each member omitted or null: the var's value), checked member by member by
 * its var's rule, then across members as the vars are, on the values that would apply: each
 * refusal an InvalidInput naming the member.
 */
export function checkPolicy(input: Record<string, unknown>, config: Config): OrganizationPolicy {
  const policy = Object.fromEntries(POLICY_MEMBERS.map((member) => [member, null])) as OrganizationPolicy;
  for (const [member, setting] of Object.entries(WHOLE_NUMBERS) as [keyof typeof WHOLE_NUMBERS, WholeNumberSetting][]) {
    const value = input[member];
    if (value == null) continue;
    const fault = wholeNumberFault(member, setting, value);
    if (fault) throw new InvalidInput(`${fault} (or null: ${setting})`, RangeError);
    policy[member] = value as number;
  }
  for (const member of Object.keys(CONTEXT) as (keyof typeof CONTEXT)[]) {
    const value = input[member];
    if (value == null) continue;
    const action = actionNamed(value);
    if (action === null) throw new InvalidInput(`${member} must be one of ${ACTIONS.join(", ")} (or null)`);
    policy[member] = action;
  }
  const sliding = input.slidingTtl;
  if (sliding != null && typeof sliding !== "boolean") throw new InvalidInput("slidingTtl must be a boolean (or null)");
  policy.slidingTtl = sliding ?? null;
  const applied = effectivePolicy(policy, config);
  if (applied.ttlSeconds > applied.maxLifetimeSeconds)
    throw new InvalidInput(
      `ttlSeconds must be <= maxLifetimeSeconds (as they would apply: ${applied.ttlSeconds} and ${applied.maxLifetimeSeconds})`,
      RangeError,
    );
  if (applied.maxLifetimeSeconds > MAX_TTL_SECONDS)
    throw new InvalidInput(`maxLifetimeSeconds must be <= ${MAX_TTL_SECONDS}`, RangeError);
  if (applied.reportTtlSeconds > config.eventRetentionDays * 86_400)
    throw new InvalidInput(
      `reportTtlSeconds must be <= SESSION_EVENTS_RETENTION_DAYS in seconds (${config.eventRetentionDays * 86_400})`,
      RangeError,
    );
  return policy;
}
