import { sql } from "drizzle-orm";
import type { Database } from "./client.ts";
import { adminKeyUses } from "./schema.ts";

// When each admin key was last used (src/services/admin-key-uses.ts), on the streams' database.

/** Records a use at `at`; an older use arriving late never moves the time back. */
export async function recordKeyUse(db: Database, keyId: string, at: Date): Promise<void> {
  await db
    .insert(adminKeyUses)
    .values({ keyId, lastUsedAt: at })
    .onConflictDoUpdate({
      target: adminKeyUses.keyId,
      set: { lastUsedAt: sql`max(${adminKeyUses.lastUsedAt}, excluded.last_used_at)` },
    });
}

export function listKeyUses(db: Database): Promise<{ keyId: string; lastUsedAt: Date }[]> {
  return db.select().from(adminKeyUses);
}
