import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import {
  jsonObject,
  pollRequestOf,
  stateOf,
  statusOf,
  streamIdOf,
  streamRequestOf,
  userOfSubject,
} from "../../domain/ssf/streams.ts";
import { readTransmitter } from "../../domain/ssf/transmitter.ts";
import { proveCredential } from "../../domain/token.ts";
import {
  addStream,
  editStream,
  getStatus,
  getStream,
  listStreams,
  pollStream,
  removeStream,
  type StreamCall,
  updateStatus,
  updateSubject,
  verifyStream,
} from "../../services/ssf/streams.ts";
import { bearerToken } from "../credentials.ts";
import { unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import {
  bodyTooLarge,
  notFound,
  receiverAnswer,
  streamFound,
  streamIdRequired,
  streamLimitReached,
  verificationTooFrequent,
} from "../refusals.ts";

// The Shared Signals stream management API (SSF 1.0 §8) and the poll endpoint (RFC 8936),
// for receivers holding a credential from `npm run ssf:receivers`. Every answer is no-store.

type StreamEnv = ScopedEnv & { Variables: { call: StreamCall } };

export const MAX_BODY_BYTES = 16 * 1024;

/** The transmitter must be on (404 otherwise) and the caller a receiver's credential (else 401). */
const requireReceiver = createMiddleware<StreamEnv>(async (c, next) => {
  const transmitter = readTransmitter(c.env);
  if (!transmitter) throw notFound();
  const token = bearerToken(c);
  const proof = token ? await proveCredential(token) : null;
  if (!proof) throw unauthorized("invalid_token", Boolean(token));
  c.set("call", { proof, transmitter, db: c.var.scope.shards.streams().db, at: c.var.scope.at.now });
  await next();
});

const limitBody = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw bodyTooLarge();
  },
});

async function body(c: Context<StreamEnv>) {
  return jsonObject(await c.req.text());
}

function allowPrivatePush(c: Context<StreamEnv>): boolean {
  return c.env.SSF_ALLOW_PRIVATE_PUSH === "true";
}

function queryStreamId(c: Context<StreamEnv>): string {
  const id = c.req.query("stream_id");
  if (id === undefined) throw streamIdRequired();
  return streamIdOf(id);
}

/** An update (PATCH: absent properties stay) or a replace (PUT: absent ones are deleted). */
async function change(c: Context<StreamEnv>, merge: boolean) {
  const input = await body(c);
  const streamId = streamIdOf(input.stream_id);
  return c.json(streamFound(receiverAnswer(await editStream(c.var.call, streamId, input, merge, allowPrivatePush(c)))));
}

export const streamRoutes = new Hono<StreamEnv>()
  .use(requireReceiver)
  .use(limitBody)
  .get("/", async (c) => {
    const id = c.req.query("stream_id");
    if (id === undefined) return c.json(receiverAnswer(await listStreams(c.var.call)));
    return c.json(streamFound(receiverAnswer(await getStream(c.var.call, streamIdOf(id)))));
  })
  .post("/", async (c) => {
    const request = streamRequestOf(await body(c), allowPrivatePush(c));
    const stream = receiverAnswer(await addStream(c.var.call, request));
    if (!stream) throw streamLimitReached();
    return c.json(stream, 201);
  })
  .patch("/", (c) => change(c, true))
  .put("/", (c) => change(c, false))
  .delete("/", async (c) => {
    streamFound(receiverAnswer(await removeStream(c.var.call, queryStreamId(c))));
    return c.body(null, 204);
  })
  .get("/status", async (c) => c.json(streamFound(receiverAnswer(await getStatus(c.var.call, queryStreamId(c))))))
  .post("/status", async (c) => {
    const input = await body(c);
    const streamId = streamIdOf(input.stream_id);
    const { status, reason } = statusOf(input);
    return c.json(streamFound(receiverAnswer(await updateStatus(c.var.call, streamId, status, reason))));
  })
  .post("/subjects/add", (c) => subject(c, true))
  .post("/subjects/remove", (c) => subject(c, false))
  .post("/verify", async (c) => {
    const input = await body(c);
    const streamId = streamIdOf(input.stream_id);
    const wait = streamFound(receiverAnswer(await verifyStream(c.var.call, streamId, stateOf(input))));
    if (wait > 0) throw verificationTooFrequent(wait);
    return c.body(null, 204);
  })
  .post("/poll/:streamId", async (c) => {
    const streamId = streamIdOf(c.req.param("streamId"));
    const request = pollRequestOf(await body(c));
    return c.json(streamFound(receiverAnswer(await pollStream(c.var.call, streamId, request))));
  });

/** Add (200, empty) or remove (204) a subject; an unknown user is accepted all the same, so no user is revealed. */
async function subject(c: Context<StreamEnv>, included: boolean) {
  const input = await body(c);
  const streamId = streamIdOf(input.stream_id);
  const userId = userOfSubject(input.subject, c.var.call.transmitter.issuer);
  streamFound(receiverAnswer(await updateSubject(c.var.call, streamId, userId, included)));
  return included ? c.body(null, 200) : c.body(null, 204);
}
