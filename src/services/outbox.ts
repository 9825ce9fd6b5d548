import { chunks, type Database } from "../db/client.ts";
import { markDelivered } from "../db/outbox.ts";
import type { Shards } from "../db/shards.ts";
import type { Logged, OutgoingEvent, Writer } from "../db/writes.ts";
import { ConfigError } from "../domain/config.ts";
import { readTransmitter, type Transmitter } from "../domain/ssf/transmitter.ts";
import { readUpstreams } from "../domain/upstreams/config.ts";
import {
  PROVIDER_PREFIX,
  readUpstreamReceivers,
  receiverOf,
  type UpstreamReceiver,
} from "../domain/upstreams/receivers.ts";
import { type SessionEventMessage, toMessage } from "./event-message.ts";
import { logOutboxFailure } from "./failure-log.ts";
import { runtimeProviders } from "./organizations/acting-providers.ts";
import { providerDestinations } from "./organizations/provider-pushes.ts";
import { pushDue, type ReadDestinations } from "./ssf/delivery.ts";
import { sawStreams, streamsMayBeLive } from "./ssf/live-streams.ts";
import { queueSets } from "./ssf/session-sets.ts";
import { upstreamSetsOf } from "./upstreams/pushed-sets.ts";

// Where session events go beyond the security log: the optional events queue (binding
// SESSION_EVENTS) and the Shared Signals streams (SSF_ISSUER). session_events is their outbox:
// an event is written with pending_delivery = 1 in the same batch as the change it records,
// sent after the response, and marked delivered once the queue accepted it and its SETs were
// queued for the streams. Whatever a failed send, a crash or a failed mark leaves pending, the
// cron sends again, so every event is delivered at least once; consumers drop duplicates by
// `id`, receivers by `jti`.

declare global {
  interface Env {
    /** Optional Queue producer: every session event is sent to it at least once. */
    SESSION_EVENTS?: Queue<SessionEventMessage>;
  }
}

export interface Outbox {
  /** Which events are written pending delivery (`Writer.queued`): the cron sends again what was not delivered. */
  readonly pending: Writer["queued"];
  /**
   * Called once the batch that wrote `events` to `db` committed; never delays the answer.
   * `db` is where they are marked delivered: the database of the user they belong to.
   */
  publish(db: Database, events: OutgoingEvent[]): void;
}

/** Whether a write through `outbox` logs its events pending delivery (`Writer.queued`). */
export function queuedBy(outbox: Outbox | null): Writer["queued"] {
  return outbox?.pending ?? false;
}

/** Hands the events a committed write logged to the outbox, if any; answers what the write answered. */
export function published<T>(outbox: Outbox | null, { answer, events, db }: Logged<T>): T {
  if (events.length > 0) outbox?.publish(db, events);
  return answer;
}

// A queue's sendBatch takes at most 100 messages.
const SEND_CHUNK = 100;

/**
 * The outlets configured: the queue, the streams (their database and the transmitter), or both.
 * `receivers`: the upstreams that take pushes, read when asked (SSF_UPSTREAMS is read only by
 * what needs it: a refused value fails the outbox's sending, logged, never a request).
 */
export interface Outlets {
  queue?: Queue<SessionEventMessage>;
  ssf: {
    streams: Database;
    transmitter: Transmitter;
    receivers: () => readonly UpstreamReceiver[];
    /** Whether SSF_UPSTREAMS lists the name: then no organization's provider is read for it. */
    listed: (name: string) => boolean;
    /** The organizations' providers as push destinations, read when their SETs are due. */
    providers: ReadDestinations;
  } | null;
}

/** The outlets `env` configures, or null for none (then events are written not pending). */
export function outletsOf(env: Env, shards: Shards): Outlets | null {
  const transmitter = readTransmitter(env);
  const streams = shards.streams().db;
  const ssf = transmitter && {
    streams,
    transmitter,
    receivers: () => readUpstreamReceivers(env),
    listed: (name: string) => readUpstreams(env).some((upstream) => upstream.name === name),
    providers: {
      prefix: PROVIDER_PREFIX,
      read: (destinations: string[]) => providerDestinations(env, streams, destinations),
    },
  };
  return env.SESSION_EVENTS || ssf ? { queue: env.SESSION_EVENTS, ssf } : null;
}

/**
 * Whether any upstream takes pushes; a refused var counts as yes, so the cron sends once it is
 * fixed (the sending logs the refusal). Any other error is the request's failure, with its line.
 */
function receiversMayBeListed(receivers: () => readonly UpstreamReceiver[]): boolean {
  try {
    return receivers().length > 0;
  } catch (error) {
    if (error instanceof ConfigError) return true;
    throw error;
  }
}

/**
 * Which of a write's events must be written pending: all for a queue or streams that may be
 * live; for an upstream that takes pushes, those of sessions signed in through an upstream (its
 * SETs then reach it at least once, as a stream's do); else, with a transmitter, those signed in
 * through an organization's provider; else none.
 */
function writesPending({ queue, ssf }: Outlets): Writer["queued"] {
  if (queue || (ssf !== null && streamsMayBeLive())) return true;
  if (ssf === null) return false;
  // An organization's provider may take pushes: whether is read when its sessions' events are sent.
  return receiversMayBeListed(ssf.receivers) ? "upstream" : "provider";
}

/**
 * Sends the events to the queue and queues their SETs, then marks the pending ones delivered (a
 * round trip to each database). Throws if any of it fails: the events stay pending, for the cron.
 */
export async function deliver({ queue, ssf }: Outlets, db: Database, events: OutgoingEvent[]): Promise<void> {
  if (queue) {
    for (const part of chunks(events, SEND_CHUNK))
      await queue.sendBatch(part.map((event) => ({ body: toMessage(event), contentType: "json" })));
  }
  // Only an event of an upstream's session reads the upstreams: the others pay nothing for them.
  const receivers = ssf && events.some((event) => event.upstream !== null) ? await receiversOf(ssf, events) : [];
  if (ssf) sawStreams(await queueSets(ssf.streams, ssf.transmitter, events, upstreamSetsOf(events, receivers)));
  await markDelivered(
    db,
    events.filter((event) => event.pendingDelivery).map((event) => event.id),
  );
}

/**
 * Pushes what is due to push streams. A failure (the streams' database, a SET that cannot be
 * signed) leaves the SETs queued for the next round and is thrown, for its caller's line.
 */
export async function push({ ssf }: Outlets, now: Date): Promise<void> {
  if (ssf) await pushDue(ssf.streams, ssf.transmitter, now, fetch, receiversOrNone(ssf.receivers), ssf.providers);
}

/**
 * The upstreams that take pushes of the events' sessions: the var's, and the organizations'
 * providers they name (none of the var's names), read when not kept. An event of an
 * organization's session goes to its own organization's provider alone (pushed-sets.ts).
 */
async function receiversOf(ssf: NonNullable<Outlets["ssf"]>, events: OutgoingEvent[]) {
  const listed = ssf.receivers();
  const names = events.flatMap((event) =>
    event.upstream !== null && event.organizationId !== null && !ssf.listed(event.upstream) ? [event.upstream] : [],
  );
  if (names.length === 0) return listed;
  // One whose stored entry is refused takes no push until it is fixed (its line says which): no
  // SET can be made from an entry the validator refuses, and what is queued for it waits.
  const { acting } = await runtimeProviders(ssf.streams, names);
  const theirs = [...acting.values()].map(({ upstream }) => receiverOf(upstream, null));
  return [...listed, ...theirs.filter((receiver) => receiver !== null)];
}

/** The upstreams that take pushes; none while the var is refused (logged), so the streams' pushes go on. */
function receiversOrNone(receivers: () => readonly UpstreamReceiver[]): readonly UpstreamReceiver[] {
  try {
    return receivers();
  } catch (error) {
    logOutboxFailure(error);
    return [];
  }
}

/**
 * The outbox of one request or RPC call, or null without outlets. `afterAnswer` runs the
 * sending beside the answer, never delaying it, and keeps it alive after (src/services/scope.ts).
 */
export function outboxFor(outlets: Outlets | null, afterAnswer: (work: () => Promise<unknown>) => void): Outbox | null {
  if (!outlets) return null;
  return {
    pending: writesPending(outlets),
    publish: (db, events) =>
      afterAnswer(() =>
        deliver(outlets, db, events)
          .then(() => push(outlets, new Date()))
          .catch(logOutboxFailure),
      ),
  };
}

/**
 * For writes made outside the worker (the operator's commands): their events are written
 * pending and left to the worker's minute cron, which holds the queue and the signing keys.
 */
export const LEFT_TO_THE_CRON: Outbox = { pending: true, publish: () => {} };
