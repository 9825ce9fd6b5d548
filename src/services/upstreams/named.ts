import { isUpstreamName, type Upstream } from "../../domain/upstreams/config.ts";
import { runtimeProviders } from "../organizations/acting-providers.ts";
import type { Scope } from "../scope.ts";

// The one lookup of an upstream by its name, for its routes and the sign-ins that name it: the
// var's entry first, then an organization's provider (src/services/organizations/acting-providers.ts).

/**
 * The upstream named `name`: the var's entry, else an organization's acting provider; null for
 * none. A provider read (not kept) is a round trip the call plans, before its own.
 */
export async function upstreamNamed(scope: Scope, name: unknown): Promise<Upstream | null> {
  const listed = scope.upstreams().find((upstream) => upstream.name === name);
  if (listed) return listed;
  if (!isUpstreamName(name)) return null;
  const found = await runtimeProviders(scope.shards.streams().db, [name], scope.plannedRoundTrip);
  return found.get(name)?.upstream ?? null;
}
