import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { type AdminScope, newAdminKey } from "../src/domain/admin-keys.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { CHROME_MAC, callWith, databases, randomIp, shardBindings } from "./helpers.ts";

// What the tests of organizations share: an organization made through the admin API, keys,
// calls, sign-ins through a provider.

/** A new organization, created as an admin creates one (POST /admin/organizations); its id. */
export async function newOrganization(name = "Acme"): Promise<string> {
  const { key, ADMIN_KEYS } = await adminKeyVars(["organizations"]);
  const created = await admin({ ADMIN_KEYS } as Partial<Env>, key, "POST", "/admin/organizations", { name });
  if (created.status !== 201) throw new Error(`creating an organization answered ${created.status}`);
  return ((await created.json()) as { id: string }).id;
}

/** The organization removed, as an admin removes it (DELETE /admin/organizations/{id}). */
export async function removeOrganization(id: string): Promise<void> {
  const { key, ADMIN_KEYS } = await adminKeyVars(["organizations"]);
  const removed = await admin({ ADMIN_KEYS } as Partial<Env>, key, "DELETE", `/admin/organizations/${id}`);
  if (removed.status !== 204) throw new Error(`removing an organization answered ${removed.status}`);
}

/** Every database an organization's policy row is on: each of SHARDS, and DB. */
export function policyDatabases(): string[] {
  return [...new Set(["DB", ...shardBindings()])];
}

/** ORGANIZATION_SECRETS_KEYS of one fresh key. */
export function secretsKeys(kid = "k1"): string {
  const k = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
  return JSON.stringify([{ kty: "oct", kid, k }]);
}

/** ADMIN_KEYS with one key of `scopes` (limited to `organization`, when given), and that key. */
export async function adminKeyVars(scopes: AdminScope[] = ["organizations"], organization?: string) {
  const { stored, key } = await newAdminKey("it admin", scopes, new Date());
  const limited = organization === undefined ? stored : { ...stored, organization };
  return { ADMIN_KEYS: JSON.stringify([limited]), key };
}

/** ADMIN_KEYS with one key of `scopes` (limited to `organization`, when given), as the vars of a call: the key and its id. */
export async function adminKey(scopes: AdminScope[] = ["organizations"], organization?: string) {
  const { stored, key } = await newAdminKey(
    organization === undefined ? "operator" : "customer IT",
    scopes,
    new Date(),
  );
  const entry = organization === undefined ? stored : { ...stored, organization };
  return { vars: { ADMIN_KEYS: JSON.stringify([entry]) } as Partial<Env>, key, id: stored.id };
}

/** An admin call with `key`, a body (JSON unless already a string) when given. */
export function admin(vars: Partial<Env>, key: string, method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = { "CF-Connecting-IP": randomIp(), Authorization: `Bearer ${key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const sent = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  return callWith(vars, method, path, headers, sent);
}

/** A call of the RPC with `vars`, waiting for what it does after its answer. */
export async function rpc<T>(vars: Partial<Env>, call: (service: SessionService) => Promise<T>): Promise<T> {
  const ctx = createExecutionContext();
  const answer = await call(new SessionService(ctx, { ...env, ...vars }));
  await waitOnExecutionContext(ctx);
  return answer;
}

/** A session signed in through `provider` as `subject` (and `sid`), as a login flow does after its callback. */
export function signIn(
  vars: Partial<Env>,
  userId: string,
  provider: string,
  subject: string,
  sid: string | null = null,
) {
  return rpc(vars, (service) =>
    service.create({ userId, userAgent: CHROME_MAC, carrier: "both", upstream: { provider, subject, sid } }),
  );
}

/** The organization a session row holds. */
export async function organizationOfSession(sessionId: string): Promise<string | null> {
  for (const db of Object.values(databases())) {
    const row = await db
      .prepare("SELECT organization_id AS organization FROM sessions WHERE id = ?")
      .bind(sessionId)
      .first<{ organization: string | null }>();
    if (row) return row.organization;
  }
  throw new Error("no such session");
}
