// Where the admin keys live on the operator's machine (scripts/admin-keys.ts), and the one
// that `npm start` serves: .wrangler/admin-keys.json, or the file ADMIN_KEYS_FILE names.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

export const ADMIN_KEYS_FILE =
  process.env.ADMIN_KEYS_FILE ?? path.join(import.meta.dirname, "..", ".wrangler", "admin-keys.json");

/** The file's keys as one line, for a secrets file; "" when there is none (no admin API). */
export function adminKeysSecret(file = ADMIN_KEYS_FILE): string {
  try {
    return JSON.stringify(JSON.parse(readFileSync(file, "utf8")));
  } catch {
    return "";
  }
}

/**
 * Writes the keys, readable only by this user (written anew: a file left behind keeps its old
 * mode), in a directory made if missing: on a fresh clone .wrangler/ is made by `npm start` only.
 */
export function writeAdminKeys(file: string, text: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  rmSync(file, { force: true });
  writeFileSync(file, text, { mode: 0o600 });
}
