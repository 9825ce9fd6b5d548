import type { Database } from "../../db/client.ts";
import { ConfigError } from "../../domain/config.ts";
import { openSecret, readSecretKeys, type SecretKeysVars } from "../../domain/organizations/secrets.ts";
import type { Upstream } from "../../domain/upstreams/config.ts";
import { providerDestination, receiverOf } from "../../domain/upstreams/receivers.ts";
import { logOutboxFailure } from "../failure-log.ts";
import type { PushDestination } from "../ssf/delivery.ts";
import { runtimeProviders } from "./acting-providers.ts";

// Sign-ins and sign-outs sent back to an organization's provider (docs/sign-outs-sent-back.md):
// its SETs wait as `provider:<organization>:<name>`'s, and where they go is read when they are
// pushed, from the provider as it acts now (still that organization's), its Authorization
// decrypted then (never kept in clear beyond the push).

/**
 * The push destinations of these queued destination ids: each its acting provider with push,
 * its Authorization opened (`found`); one whose Authorization cannot be opened (its key gone,
 * the secret unset, sealed before it named its organization) or whose stored entry is refused
 * is `failed`, logged with its organization and name, its SETs kept for a later round; a
 * provider removed, disabled or without push is neither.
 */
export async function providerDestinations(
  env: SecretKeysVars,
  db: Database,
  destinations: string[],
): Promise<{ found: PushDestination[]; failed: string[] }> {
  const names = destinations.map((destination) => destination.slice(destination.lastIndexOf(":") + 1));
  const { acting, refused } = await runtimeProviders(db, names);
  const found: PushDestination[] = [];
  // Its line was written when it was read.
  const failed = [...refused].flatMap(([name, organizationId]) => {
    const destination = providerDestination(organizationId, name);
    return destinations.includes(destination) ? [destination] : [];
  });
  await Promise.all(
    [...acting.values()].map(async ({ upstream, sealedAuthorization }) => {
      const receiver = receiverOf(upstream, null);
      // A name another organization took since the SETs were queued is not where they go.
      if (receiver === null || !destinations.includes(receiver.destination)) return;
      const { destination, endpointUrl, audience } = receiver;
      try {
        const authorization = sealedAuthorization === null ? null : await opened(env, upstream, sealedAuthorization);
        found.push({ destination, endpointUrl, audience, authorization });
      } catch (error) {
        logOutboxFailure(error, { organization: upstream.organizationId, provider: upstream.name });
        failed.push(destination);
      }
    }),
  );
  return { found, failed };
}

async function opened(env: SecretKeysVars, upstream: Upstream, sealed: string): Promise<string> {
  const keys = readSecretKeys(env);
  if (!keys) throw new ConfigError("ORGANIZATION_SECRETS_KEYS is unset, and a provider's push has an Authorization");
  return openSecret(keys, { organizationId: upstream.organizationId as string, name: upstream.name }, sealed);
}
