import type { Database } from "../../db/client.ts";
import { ConfigError } from "../../domain/config.ts";
import { openSecret, readSecretKeys, type SecretKeysVars } from "../../domain/organizations/secrets.ts";
import { PROVIDER_PREFIX, receiverOf } from "../../domain/upstreams/receivers.ts";
import type { PushDestination } from "../ssf/delivery.ts";
import { runtimeProviders } from "./acting-providers.ts";

// Sign-ins and sign-outs sent back to an organization's provider (docs/sign-outs-sent-back.md):
// its SETs wait as `provider:<name>`'s, and where they go is read when they are pushed, from the
// provider as it acts now, its Authorization decrypted then (never kept in clear beyond the push).

/**
 * The push destinations of these queued destination ids, each its acting provider with push, its
 * Authorization opened; a provider removed, disabled or without push has none. Throws (for the
 * round's line, its SETs left for the next) when an Authorization cannot be opened.
 */
export async function providerDestinations(
  env: SecretKeysVars,
  db: Database,
  destinations: string[],
): Promise<PushDestination[]> {
  const names = destinations.map((destination) => destination.slice(PROVIDER_PREFIX.length));
  const found = await runtimeProviders(db, names);
  return Promise.all(
    [...found.values()].flatMap(({ upstream, sealedAuthorization }) => {
      const receiver = receiverOf(upstream, null);
      if (receiver === null) return [];
      return [
        (async () => {
          let authorization: string | null = null;
          if (sealedAuthorization !== null) {
            const keys = readSecretKeys(env);
            if (!keys)
              throw new ConfigError("ORGANIZATION_SECRETS_KEYS is unset, and a provider's push has an Authorization");
            authorization = await openSecret(keys, upstream.name, sealedAuthorization);
          }
          const { destination, endpointUrl, audience } = receiver;
          return { destination, endpointUrl, audience, authorization };
        })(),
      ];
    }),
  );
}
