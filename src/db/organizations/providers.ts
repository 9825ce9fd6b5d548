import { and, eq, exists, inArray, sql } from "drizzle-orm";
import { batchNamed, type Database } from "../client.ts";
import { type OrganizationProviderRow, organizationProviders, organizations } from "../schema.ts";

// The identity providers organizations register at runtime, on the database bound as DB beside
// the directory of organizations. Each statement answers in one round trip; a provider is
// reached by its organization and name, so a call about one organization never reads another's.

/** What the admin API shows of a provider: every column but its sealed Authorization, which it only says is set. */
export type StoredProvider = Omit<OrganizationProviderRow, "authorization"> & { authorizationSet: boolean };

const shown = {
  name: organizationProviders.name,
  organizationId: organizationProviders.organizationId,
  config: organizationProviders.config,
  enabled: organizationProviders.enabled,
  createdAt: organizationProviders.createdAt,
  updatedAt: organizationProviders.updatedAt,
  authorizationSet: sql<boolean>`${organizationProviders.authorization} IS NOT NULL`.mapWith(Boolean),
};

const organizationExists = (db: Database, organizationId: string) =>
  exists(db.select({ one: sql`1` }).from(organizations).where(eq(organizations.id, organizationId)));

const organizationRow = (db: Database, organizationId: string) =>
  db.select({ id: organizations.id }).from(organizations).where(eq(organizations.id, organizationId));

/**
 * Writes a new provider of an existing organization; one batch. Answers what was written, or
 * why not: no such organization, or the name taken (by any organization's provider).
 */
export async function insertProvider(
  db: Database,
  row: OrganizationProviderRow,
): Promise<StoredProvider | "no_organization" | "name_taken"> {
  const values = sql`SELECT ${row.name}, ${row.organizationId}, ${row.config}, ${row.authorization}, ${row.enabled ? 1 : 0}, ${row.createdAt.getTime()}, ${row.updatedAt.getTime()} WHERE ${organizationExists(db, row.organizationId)}`;
  const { inserted, organization } = await batchNamed(db, {
    // The WHERE also keeps SQLite from reading ON CONFLICT as a join's ON.
    inserted: db.insert(organizationProviders).select(values).onConflictDoNothing().returning(shown),
    organization: organizationRow(db, row.organizationId),
  });
  if (inserted[0]) return inserted[0];
  return organization.length === 0 ? "no_organization" : "name_taken";
}

/** The organization's providers by name; null when no such organization. One batch. */
export async function providersOf(db: Database, organizationId: string): Promise<StoredProvider[] | null> {
  const { organization, providers } = await batchNamed(db, {
    organization: organizationRow(db, organizationId),
    providers: db
      .select(shown)
      .from(organizationProviders)
      .where(eq(organizationProviders.organizationId, organizationId))
      .orderBy(organizationProviders.name),
  });
  return organization.length === 0 ? null : providers;
}

const ofOrganization = (organizationId: string, name: string) =>
  and(eq(organizationProviders.organizationId, organizationId), eq(organizationProviders.name, name));

/** The organization's provider of that name, with its sealed Authorization; null for none. */
export async function providerOf(
  db: Database,
  organizationId: string,
  name: string,
): Promise<OrganizationProviderRow | null> {
  const [row] = await db.select().from(organizationProviders).where(ofOrganization(organizationId, name));
  return row ?? null;
}

/**
 * Rewrites the provider's config, Authorization and enabled state, if it is still the one read
 * (`updatedAt`, so two changes made at once never merge into one neither sent); null when it is
 * gone or was changed meanwhile.
 */
export async function updateProvider(
  db: Database,
  read: Pick<OrganizationProviderRow, "organizationId" | "name" | "updatedAt">,
  set: Pick<OrganizationProviderRow, "config" | "authorization" | "enabled" | "updatedAt">,
): Promise<StoredProvider | null> {
  const [row] = await db
    .update(organizationProviders)
    .set(set)
    .where(and(ofOrganization(read.organizationId, read.name), eq(organizationProviders.updatedAt, read.updatedAt)))
    .returning(shown);
  return row ?? null;
}

/** Removes the provider; whether it was there. */
export async function deleteProvider(db: Database, organizationId: string, name: string): Promise<boolean> {
  const gone = await db
    .delete(organizationProviders)
    .where(ofOrganization(organizationId, name))
    .returning({ name: organizationProviders.name });
  return gone.length > 0;
}

/** A provider that acts, as its routes and sign-ins find it by name */
export type ActingProvider = Pick<OrganizationProviderRow, "name" | "organizationId" | "config" | "authorization">;

/**
 * The enabled providers of these names, of organizations that exist: what acts. One statement,
 * on the primary key.
 */
export function actingProviders(db: Database, names: readonly string[]): Promise<ActingProvider[]> {
  return db
    .select({
      name: organizationProviders.name,
      organizationId: organizationProviders.organizationId,
      config: organizationProviders.config,
      authorization: organizationProviders.authorization,
    })
    .from(organizationProviders)
    .innerJoin(organizations, eq(organizations.id, organizationProviders.organizationId))
    .where(and(inArray(organizationProviders.name, [...names]), eq(organizationProviders.enabled, true)));
}
