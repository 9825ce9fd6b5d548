// Whether this isolate last saw a stream that is not disabled, and when. With none, a write
// leaves its events not pending (nothing more written than without Shared Signals) and the
// outbox still queues their SETs after the answer, best effort, checking again each time: so a
// stream just created elsewhere gets them all the same, unless this worker stops in between.

const STREAMS_SEEN_FOR_MS = 60_000;
let streamsSeen: { live: boolean; at: number } | null = null;

/** Whether a stream may be live: none was looked for yet, one was live, or the last look is old. */
export function streamsMayBeLive(): boolean {
  return streamsSeen === null || streamsSeen.live || Date.now() - streamsSeen.at > STREAMS_SEEN_FOR_MS;
}

/** Notes what queueing SETs found: whether any stream is live (src/services/ssf/session-sets.ts `queueSets`). */
export function sawStreams(live: boolean): void {
  streamsSeen = { live, at: Date.now() };
}
