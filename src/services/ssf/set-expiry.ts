import { expireQueuedSets } from "../../db/ssf/queue.ts";
import { logLine } from "../../domain/log.ts";
import type { Outlets } from "../outbox.ts";

/** The purge's part: SETs past the transmitter's retention are dropped, each stream's loss in a log line. */
export async function expireSets(outlets: Outlets | null, now: Date): Promise<number> {
  if (!outlets?.ssf) return 0;
  const cutoff = new Date(now.getTime() - outlets.ssf.transmitter.retentionDays * 86_400_000);
  const lost = await expireQueuedSets(outlets.ssf.streams, cutoff, now);
  for (const { streamId, dropped } of lost) logLine("warn", "ssf_sets_expired", { stream: streamId, dropped });
  return lost.reduce((sum, { dropped }) => sum + dropped, 0);
}
