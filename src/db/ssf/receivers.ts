import { and, asc, eq, inArray, isNull } from "drizzle-orm";
import { batchNamed, type Database } from "../client.ts";
import { ssfQueuedSets, ssfReceivers, ssfStreams } from "../schema.ts";

// The operator's statements on receiver credentials (`npm run ssf:receivers`), on the streams' database.

export type ReceiverRow = typeof ssfReceivers.$inferSelect;

export async function insertReceiver(db: Database, receiver: ReceiverRow): Promise<void> {
  // A replay of a committed insert (src/db/d1.ts) finds its own row: no error.
  await db.insert(ssfReceivers).values(receiver).onConflictDoNothing();
}

export function listReceivers(db: Database): Promise<Omit<ReceiverRow, "secretHash">[]> {
  return db
    .select({
      id: ssfReceivers.id,
      name: ssfReceivers.name,
      audience: ssfReceivers.audience,
      createdAt: ssfReceivers.createdAt,
      revokedAt: ssfReceivers.revokedAt,
    })
    .from(ssfReceivers)
    .orderBy(asc(ssfReceivers.createdAt));
}

/**
 * Refuses the credential from now on, disables its streams and drops what waits for them
 * (one batch). `revoked`: false when there is no such receiver or it was revoked already.
 */
export async function revokeReceiver(
  db: Database,
  id: string,
  at: Date,
): Promise<{ revoked: boolean; streams: number }> {
  const streamsOf = db.select({ id: ssfStreams.id }).from(ssfStreams).where(eq(ssfStreams.receiverId, id));
  const { revoked, streams } = await batchNamed(db, {
    revoked: db
      .update(ssfReceivers)
      .set({ revokedAt: at })
      .where(and(eq(ssfReceivers.id, id), isNull(ssfReceivers.revokedAt)))
      .returning({ id: ssfReceivers.id }),
    streams: db
      .update(ssfStreams)
      .set({ status: "disabled", reason: "receiver credential revoked", updatedAt: at })
      .where(eq(ssfStreams.receiverId, id))
      .returning({ id: ssfStreams.id }),
    dropped: db.delete(ssfQueuedSets).where(inArray(ssfQueuedSets.streamId, streamsOf)),
  });
  return { revoked: revoked.length > 0, streams: streams.length };
}
