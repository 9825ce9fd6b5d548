import { newOrganizationId } from "../src/domain/organizations/organization.ts";
import { d1, d1OfUser, shardBindings } from "./helpers.ts";

// Organizations for tests, written as their creation writes them (the directory's row on DB, the
// policy's on every database), straight through the D1 bindings; and member sessions: issued as
// any, then given the organization, until `create` takes one.

/** A new organization: its directory row on DB and its policy row on every database. */
export async function newOrganization(name = "Acme"): Promise<string> {
  const id = newOrganizationId();
  const now = Date.now();
  await d1("DB")
    .prepare("INSERT INTO organizations (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)")
    .bind(id, name, now, now)
    .run();
  for (const binding of shardBindings())
    await d1(binding)
      .prepare("INSERT INTO organization_policies (organization_id, updated_at) VALUES (?, ?)")
      .bind(id, now)
      .run();
  return id;
}

/** Makes the user's session `sessionId` a member's of the organization, as `create` with it would. */
export async function joinOrganization(userId: string, sessionId: string, organizationId: string): Promise<void> {
  await (await d1OfUser(userId))
    .prepare("UPDATE sessions SET organization_id = ? WHERE id = ?")
    .bind(organizationId, sessionId)
    .run();
}
