import {
  deleteProvider,
  insertProvider,
  providerOf,
  providersOf,
  type StoredProvider,
  updateProvider,
} from "../../db/organizations/providers.ts";
import type { OrganizationProviderRow } from "../../db/schema.ts";
import { InvalidInput } from "../../domain/invalid-input.ts";
import { logLine } from "../../domain/log.ts";
import {
  checkProvider,
  checkSameName,
  mergedProvider,
  type ProviderInput,
} from "../../domain/organizations/providers.ts";
import { readSecretKeys, type SecretKeysVars, sealSecret } from "../../domain/organizations/secrets.ts";
import type { Scope } from "../scope.ts";
import { forgetProvider } from "./acting-providers.ts";

// An organization's identity providers over the admin API (src/http/organizations/providers.ts):
// registered, read, changed and removed, each change one write on DB and forgotten at once by
// this isolate (src/services/organizations/acting-providers.ts; the others within its bound).
// The push's Authorization is sealed before it is written and never answered.

/** A provider as the admin API answers it: its entry as the var spells it (docs/organization-providers.md), whether it acts, whether an Authorization is set. */
export type ProviderView = Record<string, unknown> & {
  organizationId: string;
  enabled: boolean;
  authorization: { set: boolean };
  createdAt: string;
  updatedAt: string;
};

/** What the admin API answers a call on a provider that is not there, or of a missing organization. */
export type ProviderRefusal = "no_organization" | "not_found" | "name_taken" | "changed" | "no_secrets_key";

export function providerView(stored: StoredProvider): ProviderView {
  return {
    ...JSON.parse(stored.config),
    organizationId: stored.organizationId,
    enabled: stored.enabled,
    authorization: { set: stored.authorizationSet },
    createdAt: stored.createdAt.toISOString(),
    updatedAt: stored.updatedAt.toISOString(),
  };
}

/**
 * The Authorization to store, sealed: a new one under the first key of ORGANIZATION_SECRETS_KEYS
 * (without the secret, "no_secrets_key": nothing is stored in clear), none when the provider
 * has no push any more, else the stored one as it is.
 */
async function sealedAuthorization(
  env: SecretKeysVars,
  organizationId: string,
  input: ProviderInput,
  stored: string | null,
): Promise<string | null | "no_secrets_key"> {
  if (input.upstream.push === null || input.authorization === null) return null;
  if (input.authorization === undefined) return stored;
  const keys = readSecretKeys(env);
  if (!keys) return "no_secrets_key";
  return sealSecret(keys, { organizationId, name: input.upstream.name }, input.authorization);
}

function logChange(scope: Scope, organizationId: string, name: string, change: string): void {
  // The provider and its organization, never its entry or its Authorization.
  logLine("info", "provider_changed", { organization: organizationId, provider: name, change, key: scope.adminKeyId });
}

/**
 * Registers a provider of the organization. Its name must be free: no entry of SSF_UPSTREAMS
 * and no other provider has it. Throws InvalidInput for a body that breaks a rule, before any
 * read.
 */
export async function registerProvider(
  scope: Scope,
  env: SecretKeysVars,
  organizationId: string,
  body: Record<string, unknown>,
): Promise<ProviderView | ProviderRefusal> {
  const input = checkProvider(body, organizationId, scope.shards.map.regions);
  const { name } = input.upstream;
  if (scope.upstreams().some((upstream) => upstream.name === name)) return "name_taken";
  const authorization = await sealedAuthorization(env, organizationId, input, null);
  if (authorization === "no_secrets_key") return authorization;
  const now = scope.at.now;
  const row: OrganizationProviderRow = {
    name,
    organizationId,
    config: JSON.stringify(input.config),
    authorization,
    enabled: input.enabled,
    createdAt: now,
    updatedAt: now,
  };
  const written = await insertProvider(scope.shards.streams().db, row);
  if (typeof written === "string") return written;
  forgetProvider(name);
  logChange(scope, organizationId, name, "registered");
  return providerView(written);
}

/** The organization's providers; "no_organization" when there is no such organization. */
export async function listProviders(scope: Scope, organizationId: string): Promise<ProviderView[] | ProviderRefusal> {
  const providers = await providersOf(scope.shards.streams().db, organizationId);
  return providers === null ? "no_organization" : providers.map(providerView);
}

/** One provider of the organization; "not_found" when it has none of that name. */
export async function readProvider(
  scope: Scope,
  organizationId: string,
  name: string,
): Promise<ProviderView | ProviderRefusal> {
  const row = await providerOf(scope.shards.streams().db, organizationId, name);
  return row ? providerView({ ...row, authorizationSet: row.authorization !== null }) : "not_found";
}

/**
 * Changes a provider: `replace` (PUT) sends its whole entry, `merge` (PATCH) the members that
 * change (null removes one). Its name never changes. Two round trips: it is read, then written
 * if still as read ("changed" otherwise, for the caller to send again).
 */
export async function changeProvider(
  scope: Scope,
  env: SecretKeysVars,
  organizationId: string,
  name: string,
  body: Record<string, unknown>,
  mode: "replace" | "merge",
): Promise<ProviderView | ProviderRefusal> {
  const db = scope.shards.streams().db;
  const { regions } = scope.shards.map;
  checkSameName(body, name);
  const replacing = mode === "replace" ? checkProvider({ ...body, name }, organizationId, regions) : null;
  // Read before written, by design: a patch is judged with what is stored.
  scope.plannedRoundTrip();
  const stored = await providerOf(db, organizationId, name);
  if (!stored) return "not_found";
  const input =
    replacing ??
    checkProvider(
      { ...mergedProvider({ ...JSON.parse(stored.config), enabled: stored.enabled }, body), name },
      organizationId,
      regions,
      true,
    );
  // A stored secret goes only where it was given for: a new endpoint needs it given again.
  const storedEndpoint = (JSON.parse(stored.config) as { push?: { endpoint_url?: string } }).push?.endpoint_url;
  const endpoint = input.upstream.push?.endpointUrl;
  if (
    stored.authorization !== null &&
    input.authorization === undefined &&
    endpoint !== undefined &&
    storedEndpoint !== undefined &&
    URL.parse(storedEndpoint)?.href !== endpoint
  )
    throw new InvalidInput(
      "authorization must be sent again, or null, with a new push.endpoint_url: the stored one is sent only where it was given for",
      TypeError,
      true,
    );
  const authorization = await sealedAuthorization(env, organizationId, input, stored.authorization);
  if (authorization === "no_secrets_key") return authorization;
  const written = await updateProvider(db, stored, {
    config: JSON.stringify(input.config),
    authorization,
    enabled: input.enabled,
    updatedAt: new Date(Math.max(scope.at.now.getTime(), stored.updatedAt.getTime() + 1)),
  });
  if (!written) return "changed";
  forgetProvider(name);
  logChange(scope, organizationId, name, input.enabled ? "changed" : "disabled");
  return providerView(written);
}

/** Removes a provider: it acts no more (this isolate at once, the others within the bound). */
export async function removeProvider(scope: Scope, organizationId: string, name: string): Promise<boolean> {
  const removed = await deleteProvider(scope.shards.streams().db, organizationId, name);
  forgetProvider(name);
  if (removed) logChange(scope, organizationId, name, "removed");
  return removed;
}
