import { asc, eq, getTableColumns, gt } from "drizzle-orm";
import type { OrganizationPolicy } from "../../domain/organizations/policy.ts";
import { batchNamed, chunks, type Database } from "../client.ts";
import { type OrganizationPolicyRow, organizationPolicies } from "../schema.ts";

// An organization's policy row (src/db/schema.ts `organizationPolicies`), on each database that
// holds sessions: read and written here, each one batch (whose failure is the driver's own, a
// 503 to retry: src/db/d1.ts); its members' statements read it themselves (src/db/liveness.ts),
// and `create` before its batch (src/services/issue-session.ts). A database that lacks a row
// gets it copied whole from one that has it: a bucket's move, for its members' organizations
// (src/db/moves.ts), and the operator's fill from DB (src/services/organizations/directory.ts).

// D1 binds at most 100 values per statement: one per column of each row.
const POLICY_ROWS_PER_INSERT = Math.floor(100 / Object.keys(getTableColumns(organizationPolicies)).length);

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

/** At most `limit` policy rows after the organization `after` ("": from the first), in id order. */
export function readPolicyRowsAfter(db: Database, after: string, limit: number): Promise<OrganizationPolicyRow[]> {
  return db
    .select()
    .from(organizationPolicies)
    .where(gt(organizationPolicies.organizationId, after))
    .orderBy(asc(organizationPolicies.organizationId))
    .limit(limit);
}

/**
 * The statements (for a batch) that write each row as given where this database has no row of
 * its organization, each answering the organizations it wrote. A row there is left as it is: the
 * writes of every database reached it too (src/services/organizations/policy.ts), so it is as
 * new as the one copied, or newer.
 */
export function insertMissingPolicyRows(db: Database, rows: OrganizationPolicyRow[]) {
  return chunks(rows, POLICY_ROWS_PER_INSERT).map((part) =>
    db
      .insert(organizationPolicies)
      .values(part)
      .onConflictDoNothing()
      .returning({ organizationId: organizationPolicies.organizationId }),
  );
}

/** `insertMissingPolicyRows` as one batch (none: no round trip): how many rows it wrote. */
export async function writeMissingPolicyRows(db: Database, rows: OrganizationPolicyRow[]): Promise<number> {
  const [first, ...rest] = insertMissingPolicyRows(db, rows);
  if (!first) return 0;
  const written = await db.batch([first, ...rest]);
  return written.reduce((sum, part) => sum + part.length, 0);
}
