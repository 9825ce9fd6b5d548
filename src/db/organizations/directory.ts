import { asc, eq, gt } from "drizzle-orm";
import { batchNamed, type Database } from "../client.ts";
import { type OrganizationRow, organizationPolicies, organizationProviders, organizations } from "../schema.ts";

// The directory of organizations (on the database bound as DB) and each organization's policy
// row (on every database): the statements, one batch per database. Every write is replay-safe
// (D1's retry, a client's retry after a 503): an insert of what is there changes nothing, a
// delete of what is gone deletes nothing.

function insertPolicy(db: Database, id: string, at: Date) {
  return db.insert(organizationPolicies).values({ organizationId: id, updatedAt: at }).onConflictDoNothing();
}

/**
 * The directory's row and this database's policy row, in one batch; answers the row as stored:
 * the one given, or the one that had its id already (which this batch left as it was).
 */
export async function insertDirectoryEntry(db: Database, row: OrganizationRow): Promise<OrganizationRow | undefined> {
  const { stored } = await batchNamed(db, {
    entry: db.insert(organizations).values(row).onConflictDoNothing(),
    policy: insertPolicy(db, row.id, row.createdAt),
    stored: db.select().from(organizations).where(eq(organizations.id, row.id)),
  });
  return stored[0];
}

/** The policy row of a database that holds no directory. */
export async function insertPolicyRow(db: Database, id: string, at: Date): Promise<void> {
  await insertPolicy(db, id, at);
}

export async function readDirectoryEntry(db: Database, id: string): Promise<OrganizationRow | undefined> {
  return (await db.select().from(organizations).where(eq(organizations.id, id)))[0];
}

/** At most `limit` entries after `after` (none: from the first), in id order. */
export function listDirectory(db: Database, after: string | null, limit: number): Promise<OrganizationRow[]> {
  return db
    .select()
    .from(organizations)
    .where(after === null ? undefined : gt(organizations.id, after))
    .orderBy(asc(organizations.id))
    .limit(limit);
}

/** The entry renamed; undefined when there is none. */
export async function renameDirectoryEntry(
  db: Database,
  id: string,
  name: string,
  at: Date,
): Promise<OrganizationRow | undefined> {
  const [renamed] = await db
    .update(organizations)
    .set({ name, updatedAt: at })
    .where(eq(organizations.id, id))
    .returning();
  return renamed;
}

/**
 * Deletes the directory's row, its identity providers and this database's policy row, one batch:
 * how many rows it deleted, and the providers' names (for the isolate's cache to forget them).
 */
export async function deleteDirectoryEntry(
  db: Database,
  id: string,
): Promise<{ deleted: number; providers: string[] }> {
  const { entry, providers, policy } = await batchNamed(db, {
    entry: db.delete(organizations).where(eq(organizations.id, id)).returning({ id: organizations.id }),
    providers: db
      .delete(organizationProviders)
      .where(eq(organizationProviders.organizationId, id))
      .returning({ name: organizationProviders.name }),
    policy: deletePolicy(db, id),
  });
  return {
    deleted: entry.length + providers.length + policy.length,
    providers: providers.map((provider) => provider.name),
  };
}

function deletePolicy(db: Database, id: string) {
  return db
    .delete(organizationPolicies)
    .where(eq(organizationPolicies.organizationId, id))
    .returning({ id: organizationPolicies.organizationId });
}

/** Deletes the policy row of a database that holds no directory; how many rows it deleted. */
export async function deletePolicyRow(db: Database, id: string): Promise<number> {
  return (await deletePolicy(db, id)).length;
}
