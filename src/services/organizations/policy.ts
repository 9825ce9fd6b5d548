import { readPolicyRow, writePolicyRow } from "../../db/organizations/policies.ts";
import type { OrganizationPolicyRow } from "../../db/schema.ts";
import { checkOrganizationId } from "../../domain/organizations/organization.ts";
import {
  checkPolicy,
  type EffectivePolicy,
  effectivePolicy,
  type OrganizationPolicy,
  POLICY_MEMBERS,
} from "../../domain/organizations/policy.ts";
import type { Sent } from "../../domain/sent.ts";
import type { Scope } from "../scope.ts";
import { everyDatabase } from "./directory.ts";

// An organization's session policy over the admin API (docs/organization-policy.md): read from
// the directory's database, written to every database that holds sessions, where its members'
// statements read it (src/db/liveness.ts): a change governs their next request.

/** An organization's policy as answered: its own values (null: the var's) and those that apply. */
export interface PolicyView {
  organizationId: string;
  policy: OrganizationPolicy;
  effective: EffectivePolicy;
  updatedAt: string;
}

function viewOf(row: OrganizationPolicyRow, scope: Scope): PolicyView {
  const policy = Object.fromEntries(POLICY_MEMBERS.map((member) => [member, row[member]])) as OrganizationPolicy;
  return {
    organizationId: row.organizationId,
    policy,
    effective: effectivePolicy(policy, scope.config),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The organization's policy as the directory's database holds it; null: no such organization. */
export async function readOrganizationPolicy(scope: Scope, organizationId: string): Promise<PolicyView | null> {
  checkOrganizationId(organizationId, "id");
  const row = await readPolicyRow(scope.shards.streams().db, organizationId);
  return row && viewOf(row, scope);
}

/**
 * Replaces the organization's policy (a member omitted or null: the var's value) on every
 * database, in parallel, one statement each: checked whole before any is written (InvalidInput
 * naming the member). Null when the directory's database has no row for it. A retry after a
 * failure writes the same values again: every database ends with them.
 */
export async function replaceOrganizationPolicy(
  scope: Scope,
  organizationId: string,
  input: Sent<Record<string, unknown>>,
): Promise<PolicyView | null> {
  checkOrganizationId(organizationId, "id");
  const policy = checkPolicy(input ?? {}, scope.config);
  const at = scope.at.now;
  const { directory, others } = everyDatabase(scope.shards);
  const [written] = await Promise.all(
    [directory, ...others].map(async ({ db }) => writePolicyRow(db, organizationId, policy, at)),
  );
  if (!written) return null;
  return viewOf({ organizationId, updatedAt: at, ...policy }, scope);
}
