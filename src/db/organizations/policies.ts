import { eq } from "drizzle-orm";
import type { OrganizationPolicy } from "../../domain/organizations/policy.ts";
import { batchNamed, type Database } from "../client.ts";
import { type OrganizationPolicyRow, organizationPolicies } from "../schema.ts";

// An organization's policy row (src/db/schema.ts `organizationPolicies`), on each database that
// holds sessions: read and written here, each one batch (whose failure is the driver's own, a
// 503 to retry: src/db/d1.ts); its members' statements read it themselves (src/db/liveness.ts),
// and `create` before its batch (src/services/issue-session.ts).

/** The organization's row on this database; null: none (no such organization, or removed). */
export async function readPolicyRow(db: Database, organizationId: string): Promise<OrganizationPolicyRow | null> {
  const { row } = await batchNamed(db, {
    row: db.select().from(organizationPolicies).where(eq(organizationPolicies.organizationId, organizationId)),
  });
  return row[0] ?? null;
}

/**
 * Sets every setting of the organization's row on this database, one statement; false when it
 * has no row. Never creates one: a removed organization stays removed. A replay writes the same.
 */
export async function writePolicyRow(
  db: Database,
  organizationId: string,
  policy: OrganizationPolicy,
  at: Date,
): Promise<boolean> {
  const { written } = await batchNamed(db, {
    written: db
      .update(organizationPolicies)
      .set({ ...policy, updatedAt: at })
      .where(eq(organizationPolicies.organizationId, organizationId))
      .returning({ organizationId: organizationPolicies.organizationId }),
  });
  return written.length > 0;
}
