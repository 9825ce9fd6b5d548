import { ACTIONS } from "../../domain/actions.ts";
import { MAX_TTL_SECONDS, WHOLE_NUMBER_RULES } from "../../domain/config.ts";
import { ORGANIZATION_ID_PATTERN } from "../../domain/organizations/organization.ts";
import type { OrganizationPolicy } from "../../domain/organizations/policy.ts";
import { readOrganizationPolicy, replaceOrganizationPolicy } from "../../services/organizations/policy.ts";
import { adminKey, answer, members, ORGANIZATION_ID, object, scopeOf } from "../admin/routes.ts";
import { error, type JsonObject, ok } from "../openapi-parts.ts";
import { notFound } from "../refusals.ts";
import { declare } from "../route.ts";

// An organization's session policy over the admin API (docs/organization-policy.md), scope
// `organizations`: each route first asks whether the key reaches the organization.

/** A whole number by its var's rule (src/domain/config.ts), or null for the var's value. */
const whole = (setting: keyof typeof WHOLE_NUMBER_RULES): JsonObject => {
  const rule: { min: number; max?: number } = WHOLE_NUMBER_RULES[setting];
  return {
    type: ["integer", "null"],
    minimum: rule.min,
    ...(rule.max === undefined ? {} : { maximum: rule.max }),
    description: `Null: ${setting}.`,
  };
};
const action = (setting: string): JsonObject => ({ enum: [...ACTIONS, null], description: `Null: ${setting}.` });

/** Each member of a policy, with its var. */
const POLICY: { readonly [K in keyof OrganizationPolicy]-?: JsonObject } = {
  ttlSeconds: whole("SESSION_TTL_SECONDS"),
  idleTimeoutSeconds: whole("SESSION_IDLE_TIMEOUT_SECONDS"),
  slidingTtl: {
    type: ["boolean", "null"],
    description: "Null: SESSION_SLIDING_TTL; true only where SESSION_SLIDING_TTL is true.",
  },
  maxLifetimeSeconds: { ...whole("SESSION_MAX_LIFETIME_SECONDS"), maximum: MAX_TTL_SECONDS },
  maxPerUser: whole("SESSION_MAX_PER_USER"),
  stepUpMaxAgeSeconds: whole("SESSION_STEP_UP_MAX_AGE_SECONDS"),
  contextDevice: action("SESSION_CONTEXT_DEVICE"),
  contextNetwork: action("SESSION_CONTEXT_NETWORK"),
  contextTravel: action("SESSION_CONTEXT_TRAVEL"),
  travelMaxKmh: whole("SESSION_TRAVEL_MAX_KMH"),
  travelMinKm: whole("SESSION_TRAVEL_MIN_KM"),
  reportTtlSeconds: whole("SESSION_REPORT_TTL_SECONDS"),
};

const VIEW = object(["organizationId", "policy", "effective", "updatedAt"], {
  organizationId: { type: "string", pattern: ORGANIZATION_ID_PATTERN.source },
  policy: object(Object.keys(POLICY), POLICY),
  effective: {
    type: "object",
    description: "The values that apply to the organization's members: the policy's, else the var's.",
  },
  updatedAt: { type: "string", format: "date-time" },
});

const NOT_FOUND = {
  "404": error(
    "No organization with this id, or one the key does not reach (`admin_key_outside` logged); or no admin key is configured.",
    ["not_found"],
  ),
};

/** The organization's policy (null: not found, or out of the key's reach) as the answer, or its 404. */
function found<T>(value: T | null): T {
  if (value === null) throw notFound();
  return value;
}

export const ORGANIZATION_POLICY_ROUTES = [
  declare({
    method: "get",
    path: "/admin/organizations/:id/policy",
    credential: adminKey("organizations"),
    operationId: "adminReadOrganizationPolicy",
    summary: "An organization's session policy: its own settings and those that apply",
    description: "Read on the directory's database (`DB`).",
    parameters: { id: ORGANIZATION_ID },
    answers: {
      "200": ok("The policy: each setting, null for the var's value, and the values that apply.", VIEW),
      ...NOT_FOUND,
    },
    handler: (c, { id }) =>
      answer(c, 200, async () => {
        return found(await readOrganizationPolicy(scopeOf(c), id));
      }),
  }),
  declare({
    method: "put",
    path: "/admin/organizations/:id/policy",
    credential: adminKey("organizations"),
    operationId: "adminReplaceOrganizationPolicy",
    description:
      "The exception to one round trip: the policy is written to every database of `SHARDS` and `DB`, one statement each, in parallel, never creating a row; a retry writes the same values. A member omitted or null is the var's value.",
    summary:
      "Replace an organization's session policy: written to every database, it governs its members' new sessions and their live ones from their next request",
    parameters: { id: ORGANIZATION_ID },
    body: members<OrganizationPolicy>([], POLICY),
    answers: { "200": ok("The policy as written, and the values that apply.", VIEW), ...NOT_FOUND },
    handler: (c, { id, body }) =>
      answer(c, 200, async () => {
        return found(await replaceOrganizationPolicy(scopeOf(c), id, body));
      }),
  }),
] as const;
