import { ConfigError } from "../../domain/config.ts";
import { isUpstreamName, type Upstream } from "../../domain/upstreams/config.ts";
import { runtimeProviders } from "../organizations/acting-providers.ts";
import type { Scope } from "../scope.ts";

// The one lookup of an upstream by its name, for its routes and the sign-ins that name it: the
// var's entry first, then an organization's provider (src/services/organizations/acting-providers.ts).

/**
 * The upstream named `name`: the var's entry, else an organization's acting provider; null for
 * none. One whose stored entry is refused acts not: a ConfigError. A provider read (not kept) is a round trip
 * the call plans, before its own. A call limited to one organization (`Scope.reach`) finds that organization's providers alone: a
 * sign-in through any other (the var's, whose links span the deployment, or another
 * organization's) is none, so that it neither re-links a subject outside its reach nor learns
 * which names other organizations hold.
 */
export async function upstreamNamed(scope: Scope, name: unknown): Promise<Upstream | null> {
  const listed = scope.upstreams().find((upstream) => upstream.name === name);
  if (listed) return scope.reach === null ? listed : null;
  if (!isUpstreamName(name)) return null;
  const { acting, refused } = await runtimeProviders(scope.shards.streams().db, [name], scope.plannedRoundTrip);
  const found = acting.get(name)?.upstream;
  const reaches = (organization: string | null | undefined) => scope.reach === null || organization === scope.reach;
  // A provider the service holds but cannot act as is its configuration's fault, not the caller's:
  // a 500 its identity provider retries, and an operator reads (`provider_refused` names the rule).
  if (!found && refused.has(name) && reaches(refused.get(name)))
    throw new ConfigError(`the stored provider ${name} breaks a rule (provider_refused): send it again`);
  return found && reaches(found.organizationId) ? found : null;
}
