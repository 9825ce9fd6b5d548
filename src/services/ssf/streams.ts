import type { Database } from "../../db/client.ts";
import type { StreamRow } from "../../db/schema.ts";
import { pollSets } from "../../db/ssf/poll.ts";
import type { Answer, Receiver, ReceiverProof } from "../../db/ssf/receiver-reach.ts";
import {
  changeStream,
  createStream,
  deleteStream,
  requestVerification,
  setStreamStatus,
  setSubject,
  streamOf,
  streamsOf,
} from "../../db/ssf/streams.ts";
import { logLine } from "../../domain/log.ts";
import {
  checkTransmitterProperties,
  eventsDelivered,
  MIN_VERIFICATION_INTERVAL_SECONDS,
  type PollRequest,
  type Status,
  type StreamRequest,
  statusView,
  streamRequestOf,
  streamView,
  verificationClaims,
} from "../../domain/ssf/streams.ts";
import { signSet, type Transmitter } from "../../domain/ssf/transmitter.ts";
import { randomBase64Url } from "../../domain/token.ts";

// What a receiver does with its streams: the management calls (SSF 1.0 §8) and the poll (RFC
// 8936), each the one D1 round trip of its statement (src/db/ssf/) but an update, which reads
// what it merges first, and each answered as SSF shows it (src/domain/ssf/streams.ts). An
// answer's `receiver` is null when the credential was refused inside the statement; its
// `result` is null when the receiver has no such stream.

export type { Answer, ReceiverProof };

/** A receiver's call: its credential, the transmitter it calls, the streams' database, and when. */
export interface StreamCall {
  proof: ReceiverProof;
  transmitter: Transmitter;
  db: Database;
  at: Date;
}

const viewFor = (call: StreamCall) => (stream: StreamRow, receiver: Receiver) =>
  streamView(stream, call.transmitter.issuer, receiver.audience);

/** The answer's stream as `show` shows it. */
function shown<T>(
  { receiver, result }: Answer<StreamRow | null>,
  show: (stream: StreamRow, receiver: Receiver) => T,
): Answer<T | null> {
  return { receiver, result: receiver && result && show(result, receiver) };
}

export async function listStreams(call: StreamCall) {
  const { receiver, result } = await streamsOf(call.db, call.proof);
  return { receiver, result: receiver ? result.map((stream) => viewFor(call)(stream, receiver)) : [] };
}

export async function getStream(call: StreamCall, streamId: string) {
  return shown(await streamOf(call.db, call.proof, streamId), viewFor(call));
}

export async function getStatus(call: StreamCall, streamId: string) {
  return shown(await streamOf(call.db, call.proof, streamId), statusView);
}

/** A new stream, enabled; `result` null when the receiver has as many as it may. */
export async function addStream(call: StreamCall, request: StreamRequest) {
  const { at } = call;
  const stream = {
    ...request,
    id: randomBase64Url(16),
    eventsDelivered: eventsDelivered(request.eventsRequested),
    status: "enabled" as const,
    createdAt: at,
    updatedAt: at,
  };
  return shown(await createStream(call.db, call.proof, stream), viewFor(call));
}

/**
 * An update (`merge`: absent properties stay) or a replace (absent ones are deleted) by the
 * body `input`. `allowPrivate`: SSF_ALLOW_PRIVATE_PUSH.
 */
export async function editStream(
  call: StreamCall,
  streamId: string,
  input: Record<string, unknown>,
  merge: boolean,
  allowPrivate: boolean,
) {
  const { receiver, result: stream } = await streamOf(call.db, call.proof, streamId);
  if (!receiver || !stream) return { receiver, result: null };
  checkTransmitterProperties(input, viewFor(call)(stream, receiver));
  const request = streamRequestOf(input, allowPrivate, merge ? stream : undefined);
  const change = { ...request, eventsDelivered: eventsDelivered(request.eventsRequested) };
  return shown(await changeStream(call.db, call.proof, streamId, change, call.at), viewFor(call));
}

export async function updateStatus(call: StreamCall, streamId: string, status: Status, reason: string | null) {
  return shown(await setStreamStatus(call.db, call.proof, streamId, status, reason, call.at), statusView);
}

/** `result`: whether there was such a stream. */
export function removeStream(call: StreamCall, streamId: string): Promise<Answer<boolean>> {
  return deleteStream(call.db, call.proof, streamId);
}

/** Adds (`included`) or removes a user; `result`: whether there is such a stream. */
export function updateSubject(call: StreamCall, streamId: string, userId: string, included: boolean) {
  return setSubject(call.db, call.proof, streamId, userId, included);
}

/**
 * Queues a verification SET that echoes `state`. `result`: the seconds to wait when the last
 * one was asked for too recently, else 0.
 */
export async function verifyStream(call: StreamCall, streamId: string, state: string | null) {
  const { at } = call;
  const { jti, claims } = verificationClaims(streamId, state, at);
  const { receiver, result } = await requestVerification(call.db, call.proof, streamId, jti, claims, at);
  const last = result?.verificationRequestedAt?.getTime();
  // `at` itself: this request's first attempt, replayed after a lost answer, did it.
  const wait =
    last === undefined || last === at.getTime() ? 0 : last + MIN_VERIFICATION_INTERVAL_SECONDS * 1000 - at.getTime();
  return { receiver, result: result && Math.max(0, Math.ceil(wait / 1000)) };
}

/** One poll: the SETs handed out, signed now; `result` null when it is not a poll stream. */
export async function pollStream(call: StreamCall, streamId: string, { maxEvents, done, errors }: PollRequest) {
  const { receiver, result } = await pollSets(call.db, call.proof, streamId, done, maxEvents, call.at);
  if (!receiver || result.stream?.deliveryMethod !== "poll") return { receiver, result: null };
  // What a receiver refused is the transmitter's problem to look into: the ids and codes, never a SET.
  for (const { jti, err } of errors) logLine("warn", "ssf_set_refused", { stream: streamId, jti, err });
  const sets: Record<string, string> = {};
  for (const queued of result.sets) {
    sets[queued.jti] = await signSet(call.transmitter, receiver.audience, queued.claims, call.at);
  }
  return { receiver, result: { sets, moreAvailable: result.moreAvailable } };
}
