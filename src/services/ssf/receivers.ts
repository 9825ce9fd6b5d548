import type { Shards } from "../../db/shards.ts";
import { insertReceiver, listReceivers, revokeReceiver } from "../../db/ssf/receivers.ts";
import { InvalidInput } from "../../domain/invalid-input.ts";
import { hashSecret, newCredential } from "../../domain/token.ts";

// Shared Signals receiver credentials, issued and revoked by the operator (scripts/ssf-receivers.ts).
// The credential is shown once, when issued; only its secret's SHA-256 is stored.

const MAX_NAME_LENGTH = 128;

export async function issueReceiver(
  shards: Shards,
  input: { name: string; audience: string },
  at: Date,
): Promise<{ id: string; credential: string; audience: string }> {
  const name = input.name.trim();
  if (name === "" || name.length > MAX_NAME_LENGTH || /\p{Cc}/u.test(name))
    throw new InvalidInput(`name must be 1 to ${MAX_NAME_LENGTH} characters, no control characters`);
  // The `aud` of every SET the receiver gets: usually its own URL or client id.
  const audience = input.audience.trim();
  if (audience === "" || audience.length > 256 || /[\p{Cc}\s]/u.test(audience))
    throw new InvalidInput("audience must be 1 to 256 characters without spaces (e.g. the receiver's URL)");
  const { id, secret, token } = newCredential();
  await insertReceiver(shards.streams().db, {
    id,
    name,
    audience,
    secretHash: await hashSecret(secret),
    createdAt: at,
    revokedAt: null,
  });
  return { id, credential: token, audience };
}

export function receiversOf(shards: Shards) {
  return listReceivers(shards.streams().db);
}

export function revokeReceiverCredential(shards: Shards, id: string, at: Date) {
  return revokeReceiver(shards.streams().db, id, at);
}
