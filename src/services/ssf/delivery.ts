import type { Database } from "../../db/client.ts";
import { type DuePush, leaseDuePushes, recordPushes } from "../../db/ssf/queue.ts";
import { logLine } from "../../domain/log.ts";
import { signSet, type Transmitter } from "../../domain/ssf/transmitter.ts";

// The push loop (RFC 8935): the SETs queued for push streams and for the destinations beside
// them (src/db/ssf/queue.ts), whatever they say (src/services/ssf/session-sets.ts makes them),
// signed and sent, retried with backoff. Called by the outbox after the answer
// (src/services/outbox.ts) and by the minute cron, never in a request's way.

/** A push is given this long; then it counts as failed and is retried. */
const PUSH_TIMEOUT_MS = 10_000;
/**
 * How long a round holds the SETs it leased: well past a round's longest life (its pushes run
 * side by side, each cut at PUSH_TIMEOUT_MS), so a live round always records first; a round
 * that died gives its SETs back to the minute cron when it runs out.
 */
export const PUSH_LEASE_MS = 60_000;
/** One round pushes at most this many SETs (each a subrequest). */
export const PUSH_BATCH_SIZE = 50;
const FIRST_RETRY_MS = 30_000;
const LONGEST_RETRY_MS = 3_600_000;

/** Retry after 30 s, then twice as long each time, up to an hour. */
export function retryDelay(attempts: number): number {
  return Math.min(FIRST_RETRY_MS * 2 ** attempts, LONGEST_RETRY_MS);
}

export interface PushResult {
  delivered: number;
  refused: number;
  retried: number;
}

/**
 * A destination beside the streams (an upstream that takes pushes, src/domain/upstreams/receivers.ts):
 * the stream id its queued SETs carry, and where to, with which `aud` and Authorization, as
 * configured now.
 */
export interface PushDestination {
  destination: string;
  endpointUrl: string;
  audience: string;
  authorization: string | null;
}

/**
 * The destinations read when pushed (organizations' providers): every destination id that starts
 * with `prefix`, and how to read those of the leased SETs (one read for a round): those `found`;
 * those that cannot be pushed to now (`failed`: its secret would not open, logged), whose SETs
 * wait for a later round; an id it answers neither for is a provider removed, disabled or
 * without push since.
 */
export interface ReadDestinations {
  prefix: string;
  read: (destinations: string[]) => Promise<{ found: PushDestination[]; failed: string[] }>;
}

/** Where a leased SET goes: its stream's endpoint, or its destination's, as configured now; null: a destination no more. */
function targetOf(set: DuePush, destinations: readonly PushDestination[], read: ReadDestinations | null) {
  const destination = destinations.find((candidate) => candidate.destination === set.streamId);
  if (destination)
    return { url: destination.endpointUrl, authorization: destination.authorization, audience: destination.audience };
  if (read !== null && set.streamId.startsWith(read.prefix)) return null;
  return {
    url: set.endpointUrl as string,
    authorization: set.authorizationHeader,
    audience: set.audience as string,
  };
}

/**
 * Pushes the due SETs of enabled push streams and of `destinations` (RFC 8935), all signed before any is sent:
 * accepted (2xx) or refused for good (4xx but 429) they are forgotten, otherwise (the network,
 * 408, 429, 5xx) tried again after the backoff, counted from the answer. The round leases its SETs as it reads them, so rounds that
 * overlap never push one SET twice. Two round trips to the streams' database, whatever the
 * number of SETs; one more, on DB, when SETs for organizations' providers not kept by the
 * isolate are due (`read`).
 */
export async function pushDue(
  streams: Database,
  transmitter: Transmitter,
  now: Date,
  send: typeof fetch = fetch,
  listed: readonly PushDestination[] = [],
  read: ReadDestinations | null = null,
): Promise<PushResult> {
  const round = crypto.randomUUID();
  const started = Date.now();
  const due = await leaseDuePushes(
    streams,
    round,
    now,
    new Date(now.getTime() + PUSH_LEASE_MS),
    PUSH_BATCH_SIZE,
    listed.map((candidate) => candidate.destination),
    read?.prefix ?? null,
  );
  const result: PushResult = { delivered: 0, refused: 0, retried: 0 };
  if (due.length === 0) return result;
  const named = read ? [...new Set(due.map((set) => set.streamId).filter((id) => id.startsWith(read.prefix)))] : [];
  const { found, failed } = named.length > 0 ? await (read as ReadDestinations).read(named) : { found: [], failed: [] };
  const destinations = [...listed, ...found];
  const done: { streamId: string; jti: string }[] = [];
  const retry: { streamId: string; jti: string; nextAttemptAt: Date }[] = [];
  // One organization's provider that cannot be pushed to now holds back its own SETs alone.
  const held = due.filter((set) => failed.includes(set.streamId));
  for (const set of held) retry.push({ ...set, nextAttemptAt: new Date(now.getTime() + retryDelay(set.attempts)) });
  result.retried += held.length;
  // Signed and built before any is sent, outside the catch below: neither fails by the network,
  // only by a bug, a broken key or a stored value the Fetch API refuses (an Authorization no
  // header may carry), so it throws out of the round (the caller logs it) and nothing is sent;
  // the SETs come back when the lease lapses, for the next round.
  const targeted = due
    .filter((set) => !failed.includes(set.streamId))
    .map((set) => ({ set, target: targetOf(set, destinations, read) }));
  // A provider that stopped acting is sent nothing more: its SETs are forgotten, as refused for good.
  for (const { set } of targeted.filter(({ target }) => target === null)) {
    done.push(set);
    result.refused++;
    logLine("warn", "ssf_push_dropped", { stream: set.streamId, jti: set.jti });
  }
  const signed = await Promise.all(
    targeted.flatMap(({ set, target }) =>
      target === null
        ? []
        : [(async () => ({ set, target, body: await signSet(transmitter, target.audience, set.claims, now) }))()],
    ),
  );
  const pushes = signed.map(({ set, target, body }) => ({
    set,
    request: new Request(target.url, {
      method: "POST",
      headers: {
        "Content-Type": "application/secevent+jwt",
        Accept: "application/json",
        ...(target.authorization === null ? {} : { Authorization: target.authorization }),
      },
      body,
      // A redirect could point anywhere, a private address included: never followed.
      redirect: "manual",
      signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
    }),
  }));
  await Promise.all(
    pushes.map(async ({ set, request }) => {
      let status = 0;
      try {
        const response = await send(request);
        status = response.status;
        await response.body?.cancel();
      } catch (error) {
        // The network or the receiver (unreachable, timed out, reset): retried after the backoff.
        // The error's name only: its message may quote the endpoint, credentials and all.
        logLine("warn", "ssf_push_failed", {
          stream: set.streamId,
          jti: set.jti,
          name: error instanceof Error ? error.name : "error",
        });
      }
      const accepted = status >= 200 && status < 300;
      const refused = status >= 400 && status < 500 && status !== 429 && status !== 408;
      if (accepted || refused) done.push(set);
      else {
        const answeredAt = now.getTime() + (Date.now() - started);
        retry.push({ ...set, nextAttemptAt: new Date(answeredAt + retryDelay(set.attempts)) });
      }
      if (accepted) result.delivered++;
      else if (refused) {
        result.refused++;
        // The receiver's status only: its body may quote the SET.
        logLine("warn", "ssf_push_refused", { stream: set.streamId, jti: set.jti, status });
      } else result.retried++;
    }),
  );
  await recordPushes(streams, round, done, retry);
  return result;
}
