import type { Database } from "../../db/client.ts";
import {
  deleteDirectoryEntry,
  deletePolicyRow,
  insertDirectoryEntry,
  insertPolicyRow,
  listDirectory,
  readDirectoryEntry,
  renameDirectoryEntry,
} from "../../db/organizations/directory.ts";
import { readPolicyRowsAfter, writeMissingPolicyRows } from "../../db/organizations/policies.ts";
import type { OrganizationPolicyRow, OrganizationRow } from "../../db/schema.ts";
import { type Shard, type Shards, STREAMS_BINDING } from "../../db/shards.ts";
import { InvalidInput } from "../../domain/invalid-input.ts";
import {
  checkOrganizationId,
  checkOrganizationName,
  newOrganizationId,
  type OrganizationView,
} from "../../domain/organizations/organization.ts";
import type { Sent } from "../../domain/sent.ts";
import type { Scope } from "../scope.ts";
import { forgetProvider } from "./acting-providers.ts";

// The directory of organizations (docs/organizations.md): its entries on the database bound as
// DB, each organization's policy row on every database, so a member's statements read it where
// they run. Creating and removing write every database, one batch each, in parallel; reading
// and renaming ask DB alone.

export interface CreateOrganizationInput {
  name: string;
  /**
   * The id to create it under, drawn by the caller (`org_` and 16 random bytes in base64url) so
   * that a retry after a 503 creates nothing twice: the same id and name answer the organization
   * and complete what the first attempt left undone. Omitted: the service draws one.
   */
  id?: string;
}

export const MAX_ORGANIZATIONS_LISTED = 100;
export const ORGANIZATIONS_LISTED = 50;
/** Policy rows read per round trip while copying them where they are missing. */
const POLICIES_COPIED_A_PAGE = 500;

const view = (row: OrganizationRow): OrganizationView => ({
  id: row.id,
  name: row.name,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
});

/** Every database once: DB, which holds the directory, first. */
export function everyDatabase(shards: Shards): { directory: Shard; others: Shard[] } {
  return {
    directory: shards.streams(),
    others: shards.all().filter((shard) => shard.binding !== STREAMS_BINDING),
  };
}

export async function createOrganization(
  scope: Scope,
  input: Sent<CreateOrganizationInput>,
): Promise<OrganizationView> {
  const name = checkOrganizationName(input?.name);
  const id = input.id === undefined ? newOrganizationId() : checkOrganizationId(input.id, "id");
  const { directory, others } = everyDatabase(scope.shards);
  const row = { id, name, createdAt: scope.at.now, updatedAt: scope.at.now };
  const [stored] = await Promise.all([
    insertDirectoryEntry(directory.db, row),
    ...others.map((shard) => insertPolicyRow(shard.db, id, scope.at.now)),
  ]);
  if (!stored) throw new Error("the organization's directory entry was not stored");
  if (stored.name !== name)
    throw new InvalidInput(`id names an organization that exists under another name`, TypeError, true);
  return view(stored);
}

/** The organization, or null when the directory has none of this id. */
export async function readOrganization(scope: Scope, id: string): Promise<OrganizationView | null> {
  const row = await readDirectoryEntry(scope.shards.streams().db, checkOrganizationId(id, "id"));
  return row ? view(row) : null;
}

export interface ListOrganizationsInput {
  /** 1 to MAX_ORGANIZATIONS_LISTED; omitted: ORGANIZATIONS_LISTED. */
  limit?: number;
  /** The `nextCursor` of the page before; omitted: the first page. */
  cursor?: string | null;
}

/** A page of the directory, in id order; `nextCursor` null on the last. `only`: that organization alone (a limited key's list). */
export async function listOrganizations(
  scope: Scope,
  input: Sent<ListOrganizationsInput>,
  only: string | null = null,
): Promise<{ organizations: OrganizationView[]; nextCursor: string | null }> {
  const limit = input.limit ?? ORGANIZATIONS_LISTED;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_ORGANIZATIONS_LISTED)
    throw new InvalidInput(`limit must be an integer from 1 to ${MAX_ORGANIZATIONS_LISTED}`, RangeError);
  const cursor = input.cursor == null ? null : checkOrganizationId(input.cursor, "cursor");
  if (only !== null) {
    const own = cursor === null ? await readOrganization(scope, only) : null;
    return { organizations: own ? [own] : [], nextCursor: null };
  }
  // One more than asked: whether a next page exists, without a count.
  const rows = await listDirectory(scope.shards.streams().db, cursor, limit + 1);
  const page = rows.slice(0, limit);
  return {
    organizations: page.map(view),
    nextCursor: rows.length > limit ? (page.at(-1)?.id ?? null) : null,
  };
}

/** The organization renamed, or null when the directory has none of this id. */
export async function renameOrganization(
  scope: Scope,
  id: string,
  input: Sent<{ name: string }>,
): Promise<OrganizationView | null> {
  checkOrganizationId(id, "id");
  const name = checkOrganizationName(input?.name);
  const row = await renameDirectoryEntry(scope.shards.streams().db, id, name, scope.at.now);
  return row ? view(row) : null;
}

/**
 * Removes the directory's entry and every database's policy row; false when none of them was
 * there. A retry after a 503 removes what the first attempt left, and answers true.
 */
export async function removeOrganization(scope: Scope, id: string): Promise<boolean> {
  checkOrganizationId(id, "id");
  const { directory, others } = everyDatabase(scope.shards);
  const [entry, ...policies] = await Promise.all([
    deleteDirectoryEntry(directory.db, id),
    ...others.map((shard) => deletePolicyRow(shard.db, id)),
  ]);
  // Its providers stop acting in this isolate at once, in the others within the cache's bound.
  for (const name of entry.providers) forgetProvider(name);
  return entry.deleted > 0 || policies.some((count) => count > 0);
}

/**
 * Writes on every database but DB each policy row DB holds (the reference: written in one
 * batch with its directory entry) that it lacks (`npm run org -- sync-policies`): for a database
 * added to SHARDS after organizations were created. Running it again writes nothing. Answers
 * how many rows each database was missing.
 */
export async function fillPolicyRows(scope: Scope): Promise<{ filled: Record<string, number> }> {
  const { directory, others } = everyDatabase(scope.shards);
  return { filled: await copyMissingPolicyRows(directory.db, others) };
}

/**
 * Writes on each of `others` every policy row `from` holds and it lacks, as `from` holds it; a
 * row there is left as it is. A page of `from`'s rows a round trip, then one batch on each of
 * `others`, in parallel. Answers how many rows each one was missing.
 */
export async function copyMissingPolicyRows(from: Database, others: Shard[]): Promise<Record<string, number>> {
  const filled: Record<string, number> = Object.fromEntries(others.map((shard) => [shard.binding, 0]));
  for (let after = ""; ; ) {
    const page = await readPolicyRowsAfter(from, after, POLICIES_COPIED_A_PAGE);
    await Promise.all(
      others.map(async ({ binding, db }) => {
        filled[binding] = (filled[binding] ?? 0) + (await writeMissingPolicyRows(db, page));
      }),
    );
    if (page.length < POLICIES_COPIED_A_PAGE) return filled;
    after = (page.at(-1) as OrganizationPolicyRow).organizationId;
  }
}
