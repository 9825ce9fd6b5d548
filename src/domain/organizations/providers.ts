import { InvalidInput } from "../invalid-input.ts";
import { isObject, type Upstream, upstreamOf } from "../upstreams/config.ts";
import { AUTHORIZATION_RULE, isAuthorizationValue } from "../upstreams/receivers.ts";

// An organization's identity provider, registered over the admin API
// (docs/organization-providers.md): an SSF_UPSTREAMS entry, held to the var's every rule by the
// var's own validator (`upstreamOf`), beside whether it acts (`enabled`) and its push's
// Authorization, a secret sent only to be stored sealed (src/domain/organizations/secrets.ts),
// never shown again.

/** The members of an SSF_UPSTREAMS entry: what a provider's stored config holds. */
export const ENTRY_MEMBERS = [
  "name",
  "issuer",
  "client_id",
  "jwks",
  "jwks_uri",
  "audience",
  "subject",
  "subjects_are_user_ids",
  "events",
  "region",
  "acr_levels",
  "push",
] as const;

/** What a provider is, as checked. */
export interface ProviderInput {
  /** The entry as the var would hold it, to store. */
  config: Record<string, unknown>;
  upstream: Upstream;
  enabled: boolean;
  /** A new Authorization; null: none (any stored one removed); undefined: the stored one kept while it has push. */
  authorization: string | null | undefined;
}

/**
 * A body (POST, PUT, or a PATCH merged over the stored entry: `merged`) checked as a provider of
 * `organizationId`; throws InvalidInput naming the member and its rule. `regions`: SHARDS'.
 */
export function checkProvider(
  body: Record<string, unknown>,
  organizationId: string,
  regions: ReadonlyMap<string, unknown>,
  merged = false,
): ProviderInput {
  // A patch is judged with what is stored: still the caller's to fix.
  const refused = (rule: string) => new InvalidInput(rule, TypeError, merged);
  const { enabled = true, authorization, ...entry } = body;
  if (typeof enabled !== "boolean") throw refused("enabled, when given, is true or false");
  // Absent members stay absent, as in the var: `undefined` is never stored.
  const config = Object.fromEntries(Object.entries(entry).filter(([, value]) => value !== undefined));
  const upstream = upstreamOf(config, refused, organizationId);
  if (upstream.region !== null && !regions.has(upstream.region))
    throw refused("region, when given, is one of the regions of SHARDS");
  if (authorization !== undefined && authorization !== null) {
    if (!isAuthorizationValue(authorization)) throw refused(`authorization is ${AUTHORIZATION_RULE}, or null`);
    if (upstream.push === null) throw refused("authorization comes with push (the Authorization its pushes carry)");
  }
  return { config, upstream, enabled, authorization: authorization as string | null | undefined };
}

/** A body's `name` in a change: the path's, or absent (a provider is never renamed). */
export function checkSameName(body: Record<string, unknown>, name: string): void {
  if (body.name !== undefined && body.name !== name)
    throw new InvalidInput("name, when given, is the provider's name in the path: a provider is never renamed");
}

/** A PATCH: each member of `patch` replaces the stored one, a null member removes it (`enabled` and `authorization` as given). */
export function mergedProvider(stored: Record<string, unknown>, patch: Record<string, unknown>) {
  const merged: Record<string, unknown> = { ...stored };
  for (const [member, value] of Object.entries(patch)) {
    if (value === null && member !== "authorization") delete merged[member];
    else merged[member] = value;
  }
  return merged;
}

/** The stored config as an Upstream of its organization, by the var's validator: a stored value it refuses is the service's failure. */
export function storedUpstream(config: string, organizationId: string): Upstream {
  const parsed: unknown = JSON.parse(config);
  if (!isObject(parsed)) throw new Error("a stored provider is not an object");
  return upstreamOf(parsed, (rule) => new Error(`a stored provider breaks a rule: ${rule}`), organizationId);
}
