import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import type { StreamRow } from "../../db/schema.ts";
import { pollSets } from "../../db/ssf/poll.ts";
import type { Answer, Receiver, ReceiverProof } from "../../db/ssf/receiver-scope.ts";
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
import {
  checkTransmitterProperties,
  eventsDelivered,
  jsonObject,
  MIN_VERIFICATION_INTERVAL_SECONDS,
  pollRequestOf,
  type StreamRequest,
  stateOf,
  statusOf,
  statusView,
  streamIdOf,
  streamRequestOf,
  streamView,
  userOfSubject,
  verificationClaims,
} from "../../domain/ssf/streams.ts";
import { readTransmitter, signSet, type Transmitter } from "../../domain/ssf/transmitter.ts";
import { proveToken, randomBase64Url } from "../../domain/token.ts";
import type { AppEnv } from "../context.ts";
import { bearerToken } from "../credentials.ts";
import { ApiError, unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";

// The Shared Signals stream management API (SSF 1.0 §8) and the poll endpoint (RFC 8936),
// for receivers holding a credential from `npm run ssf:receivers`. Every answer is no-store.

type StreamEnv = AppEnv & { Variables: { transmitter: Transmitter; receiverProof: ReceiverProof } };

const MAX_BODY_BYTES = 16 * 1024;

/** The transmitter must be on (404 otherwise) and the caller a receiver's credential (else 401). */
const requireReceiver = createMiddleware<StreamEnv>(async (c, next) => {
  const transmitter = readTransmitter(c.env);
  if (!transmitter) throw new ApiError(404, "not_found");
  c.set("transmitter", transmitter);
  const token = bearerToken(c);
  const proof = token ? await proveToken(token) : null;
  if (!proof) throw unauthorized("invalid_token", Boolean(token));
  c.set("receiverProof", proof);
  await next();
});

const limitBody = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw new ApiError(413, "body_too_large");
  },
});

async function body(c: Context<StreamEnv>) {
  return jsonObject(await c.req.text());
}

/** The answer's receiver, or 401 when the credential was refused inside the statement. */
function authenticated<T>(answer: Answer<T>): { receiver: Receiver; result: T } {
  if (!answer.receiver) throw unauthorized("invalid_token", true);
  return answer as { receiver: Receiver; result: T };
}

function found<T>(value: T | null | false): T {
  if (value === null || value === false) throw new ApiError(404, "stream_not_found");
  return value;
}

function streamsDb(c: Context<StreamEnv>) {
  return c.var.shards.streams().db;
}

function allowPrivatePush(c: Context<StreamEnv>): boolean {
  return c.env.SSF_ALLOW_PRIVATE_PUSH === "true";
}

function view(c: Context<StreamEnv>, stream: StreamRow, receiver: Receiver) {
  return streamView(stream, c.var.transmitter.issuer, receiver.audience);
}

function queryStreamId(c: Context<StreamEnv>): string {
  const id = c.req.query("stream_id");
  if (id === undefined) throw new ApiError(400, "stream_id_required");
  return streamIdOf(id);
}

/** An update (PATCH: absent properties stay) or a replace (PUT: absent ones are deleted). */
async function change(c: Context<StreamEnv>, merge: boolean) {
  const input = await body(c);
  const streamId = streamIdOf(input.stream_id);
  const db = streamsDb(c);
  const { receiver, result: current } = authenticated(await streamOf(db, c.var.receiverProof, streamId));
  const stream = found(current);
  checkTransmitterProperties(input, view(c, stream, receiver));
  const request: StreamRequest = streamRequestOf(input, allowPrivatePush(c), merge ? stream : undefined);
  const changed = authenticated(
    await changeStream(
      db,
      c.var.receiverProof,
      streamId,
      { ...request, eventsDelivered: eventsDelivered(request.eventsRequested) },
      c.var.at.now,
    ),
  );
  return c.json(view(c, found(changed.result), changed.receiver));
}

export const streamRoutes = new Hono<StreamEnv>()
  .use(requireReceiver)
  .use(limitBody)
  .get("/", async (c) => {
    const db = streamsDb(c);
    const id = c.req.query("stream_id");
    if (id === undefined) {
      const { receiver, result } = authenticated(await streamsOf(db, c.var.receiverProof));
      return c.json(result.map((stream) => view(c, stream, receiver)));
    }
    const { receiver, result } = authenticated(await streamOf(db, c.var.receiverProof, streamIdOf(id)));
    return c.json(view(c, found(result), receiver));
  })
  .post("/", async (c) => {
    const request = streamRequestOf(await body(c), allowPrivatePush(c));
    const at = c.var.at.now;
    const { receiver, result } = authenticated(
      await createStream(streamsDb(c), c.var.receiverProof, {
        ...request,
        id: randomBase64Url(16),
        eventsDelivered: eventsDelivered(request.eventsRequested),
        status: "enabled",
        createdAt: at,
        updatedAt: at,
      }),
    );
    if (!result) throw new ApiError(403, "stream_limit_reached");
    return c.json(view(c, result, receiver), 201);
  })
  .patch("/", (c) => change(c, true))
  .put("/", (c) => change(c, false))
  .delete("/", async (c) => {
    const streamId = queryStreamId(c);
    found(authenticated(await deleteStream(streamsDb(c), c.var.receiverProof, streamId)).result);
    return c.body(null, 204);
  })
  .get("/status", async (c) => {
    const { result } = authenticated(await streamOf(streamsDb(c), c.var.receiverProof, queryStreamId(c)));
    return c.json(statusView(found(result)));
  })
  .post("/status", async (c) => {
    const input = await body(c);
    const streamId = streamIdOf(input.stream_id);
    const { status, reason } = statusOf(input);
    const { result } = authenticated(
      await setStreamStatus(streamsDb(c), c.var.receiverProof, streamId, status, reason, c.var.at.now),
    );
    return c.json(statusView(found(result)));
  })
  .post("/subjects/add", (c) => subject(c, true))
  .post("/subjects/remove", (c) => subject(c, false))
  .post("/verify", async (c) => {
    const input = await body(c);
    const streamId = streamIdOf(input.stream_id);
    const state = stateOf(input);
    const at = c.var.at.now;
    const { jti, claims } = verificationClaims(streamId, state, at);
    const { result } = authenticated(
      await requestVerification(streamsDb(c), c.var.receiverProof, streamId, jti, claims, at),
    );
    const before = found(result);
    const last = before.verificationRequestedAt?.getTime();
    // `at` itself: this request's first attempt, replayed after a lost answer, did it.
    if (last !== undefined && last !== at.getTime() && at.getTime() - last < MIN_VERIFICATION_INTERVAL_SECONDS * 1000) {
      const wait = Math.ceil((last + MIN_VERIFICATION_INTERVAL_SECONDS * 1000 - at.getTime()) / 1000);
      throw new ApiError(429, "verification_too_frequent", { headers: { "Retry-After": String(wait) } });
    }
    return c.body(null, 204);
  })
  .post("/poll/:streamId", async (c) => {
    const streamId = streamIdOf(c.req.param("streamId"));
    const { maxEvents, done, errors } = pollRequestOf(await body(c));
    const { receiver, result } = authenticated(
      await pollSets(streamsDb(c), c.var.receiverProof, streamId, done, maxEvents, c.var.at.now),
    );
    const stream = found(result.stream);
    if (stream.deliveryMethod !== "poll") throw new ApiError(404, "stream_not_found");
    // What a receiver refused is the transmitter's problem to look into: the ids and codes, never a SET.
    for (const { jti, err } of errors)
      console.warn(JSON.stringify({ level: "warn", event: "ssf_set_refused", stream: streamId, jti, err }));
    const sets: Record<string, string> = {};
    for (const queued of result.sets) {
      sets[queued.jti] = await signSet(c.var.transmitter, receiver.audience, queued.claims, c.var.at.now);
    }
    return c.json({ sets, moreAvailable: result.moreAvailable });
  });

/** Add (200, empty) or remove (204) a subject; an unknown user is accepted all the same, so no user is revealed. */
async function subject(c: Context<StreamEnv>, included: boolean) {
  const input = await body(c);
  const streamId = streamIdOf(input.stream_id);
  const userId = userOfSubject(input.subject, c.var.transmitter.issuer);
  found(authenticated(await setSubject(streamsDb(c), c.var.receiverProof, streamId, userId, included)).result);
  return included ? c.body(null, 200) : c.body(null, 204);
}
