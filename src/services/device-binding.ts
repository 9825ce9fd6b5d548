import { calculateJwkThumbprint } from "jose";
import {
  type RefreshOutcome,
  type RegistrationOutcome,
  refreshBinding,
  registerBinding,
} from "../db/device-binding.ts";
import { newBoundSecret, newChallenge } from "../domain/device-binding.ts";
import type { PublicKey } from "../domain/jws.ts";
import { hashSecret } from "../domain/token.ts";
import { contextCheck, type Scope, write } from "./scope.ts";
import type { SessionToken } from "./session-token.ts";

// Device binding (DBSC, src/domain/device-binding.ts): what a browser's registration and
// refresh write once their device proofs are verified, each one D1 round trip. Neither counts as the
// user's activity.

/** A verified proof: the challenge it signed (null: none valid) and the key it signed with. */
export interface VerifiedDeviceProof<Challenge = string> {
  challenge: Challenge;
  key: PublicKey;
}

/**
 * Binds the token's session to the proof's key (logged `device_bound`), once the caller's
 * context is judged like any use of the token; `nextChallenge` is the one the next proof signs.
 */
export async function registerDevice(
  scope: Scope,
  { shard, proof }: SessionToken,
  verified: VerifiedDeviceProof,
): Promise<{ outcome: RegistrationOutcome; nextChallenge: string }> {
  const binding = {
    challenge: verified.challenge,
    thumbprint: await calculateJwkThumbprint(verified.key),
    nextChallenge: newChallenge(),
  };
  const outcome = await write(scope, proof.id, (writer) =>
    registerBinding(shard, proof, binding, writer, scope.at, contextCheck(scope)),
  );
  return { outcome, nextChallenge: binding.nextChallenge };
}

/**
 * Renews the bound cookie of the token's session if the proof holds (`secret`: the new cookie's
 * value), else only replaces the challenge, for the 403 that asks for a proof.
 */
export async function refreshDevice(
  { config, at }: Scope,
  { shard, proof }: SessionToken,
  verified: VerifiedDeviceProof<string | null>,
): Promise<{ outcome: RefreshOutcome; nextChallenge: string; secret: string }> {
  const secret = newBoundSecret();
  const renewal = {
    challenge: verified.challenge,
    thumbprint: await calculateJwkThumbprint(verified.key),
    nextChallenge: newChallenge(),
    boundHash: await hashSecret(secret),
    boundExpiresAt: new Date(at.now.getTime() + config.boundCookieSeconds * 1000),
  };
  const outcome = await refreshBinding(shard, proof, renewal, at);
  return { outcome, nextChallenge: renewal.nextChallenge, secret };
}
