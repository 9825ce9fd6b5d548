import { d1, shardBindings } from "./helpers.ts";

// Organizations as their creation leaves them, for tests of what reads them (the policy, an
// admin route's scope): rows inserted directly, on the databases the directory uses.

/** Every database an organization's policy row is on: each of SHARDS, and DB. */
export function policyDatabases(): string[] {
  return [...new Set(["DB", ...shardBindings()])];
}

/** A new organization: its directory row on DB and an empty policy row (the vars') on every database. */
export async function newOrganization(): Promise<string> {
  const id = `org_${crypto.randomUUID().replaceAll("-", "").slice(0, 22)}`;
  const now = Date.now();
  await d1("DB")
    .prepare("INSERT INTO organizations (id, name, created_at, updated_at) VALUES (?, 'Acme', ?, ?)")
    .bind(id, now, now)
    .run();
  for (const binding of policyDatabases())
    await d1(binding)
      .prepare("INSERT INTO organization_policies (organization_id, updated_at) VALUES (?, ?)")
      .bind(id, now)
      .run();
  return id;
}

/** The organization removed: its policy rows gone from every database. */
export async function removeOrganization(id: string): Promise<void> {
  for (const binding of policyDatabases())
    await d1(binding).prepare("DELETE FROM organization_policies WHERE organization_id = ?").bind(id).run();
}
