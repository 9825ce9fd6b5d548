import { listKeyUses, recordKeyUse } from "../db/admin-key-uses.ts";
import type { Shards } from "../db/shards.ts";
import { logLine } from "../domain/log.ts";

// When each admin key was last used, for the operator's list. Not in the call's own round trip
// (that one goes to the user's database, the key's check to none): after the answer, and at
// most once a minute per key per isolate, so a busy login flow writes one row a minute, not one
// per sign-in. The `admin_call` log line records every use.

/** How stale a key's recorded last use may be. */
export const KEY_USE_INTERVAL_MS = 60_000;

const lastWritten = new Map<string, number>();

/** Records that `keyId` was used at `at`, unless this isolate did within the interval. */
export async function noteKeyUse(shards: Shards, keyId: string, at: Date): Promise<void> {
  const last = lastWritten.get(keyId);
  if (last !== undefined && at.getTime() - last < KEY_USE_INTERVAL_MS) return;
  lastWritten.set(keyId, at.getTime());
  try {
    await recordKeyUse(shards.streams().db, keyId, at);
  } catch (error) {
    // Only the operator's list misses it: the call was answered, and its log line says it all.
    lastWritten.delete(keyId);
    logLine("warn", "admin_key_use_unrecorded", { key: keyId, message: error instanceof Error ? error.name : "error" });
  }
}

/** Each key's last recorded use, by key id. */
export async function keyUsesOf(shards: Shards): Promise<Map<string, Date>> {
  return new Map((await listKeyUses(shards.streams().db)).map(({ keyId, lastUsedAt }) => [keyId, lastUsedAt]));
}
