import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import {
  jsonObject,
  MAX_DESCRIPTION_LENGTH,
  MAX_EVENT_TYPES,
  MAX_POLL_EVENTS,
  MAX_STATE_LENGTH,
  MAX_STATUS_REASON_LENGTH,
  MAX_STREAM_ID_LENGTH,
  MIN_VERIFICATION_INTERVAL_SECONDS,
  pollRequestOf,
  STATUSES,
  STREAMS_PATH,
  stateOf,
  statusOf,
  streamIdOf,
  streamRequestOf,
  userOfSubject,
} from "../../domain/ssf/streams.ts";
import { readTransmitter } from "../../domain/ssf/transmitter.ts";
import { parseCredential } from "../../domain/token.ts";
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
import type { ErrorCode } from "../error-codes.ts";
import { unauthorized } from "../errors.ts";
import { type ScopedEnv, withScope } from "../middleware/scope.ts";
import {
  AUTH_ERRORS,
  CHALLENGE,
  error,
  type JsonObject,
  json,
  METHOD_NOT_ALLOWED,
  NO_STORE,
  ok,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";
import {
  bodyTooLarge,
  notFound,
  receiverAnswer,
  streamFound,
  streamIdRequired,
  streamLimitReached,
  verificationTooFrequent,
} from "../refusals.ts";
import { type Credential, declare, type Mount } from "../route.ts";

// The Shared Signals stream management API (SSF 1.0 §8) and the poll endpoint (RFC 8936),
// for receivers holding a credential from `npm run ssf:receivers`. Every answer is no-store.

type StreamEnv = ScopedEnv & { Variables: { call: StreamCall } };

const MAX_BODY_BYTES = 16 * 1024;

/** The transmitter must be on (404 otherwise) and the caller a receiver's credential (else 401). */
const requireReceiver = createMiddleware<StreamEnv>(async (c, next) => {
  const transmitter = readTransmitter(c.env);
  if (!transmitter) throw notFound();
  const token = bearerToken(c);
  const proof = token ? await parseCredential(token) : null;
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

/** The stream management API and poll: every request under it opens its scope. */
const STREAMS: Mount = { path: STREAMS_PATH, use: [withScope] };

/** A receiver's credential (`requireReceiver`), and a body within its bound. */
const RECEIVER: Credential<StreamEnv> = {
  security: [{ receiver: [] }],
  mount: STREAMS,
  use: [requireReceiver, limitBody],
  answers: {
    "401": error("No receiver credential, or one that is malformed, unknown or revoked.", ["invalid_token"], CHALLENGE),
    "404": error(
      "`not_found`: no transmitter is configured (SSF_ISSUER is empty). `stream_not_found`: no stream with this id belongs to this receiver. Nothing changed.",
      ["not_found", "stream_not_found"],
    ),
    "413": error(`The body is over ${MAX_BODY_BYTES / 1024} KiB; nothing changed.`, ["body_too_large"]),
    ...RATE_LIMITED,
    ...AUTH_ERRORS,
  },
  otherMethods: METHOD_NOT_ALLOWED,
};

// What the document says of the calls' bodies and of their refusal.
const BAD_BODY = (codes: readonly ErrorCode[] = ["invalid_request_body"]) => ({
  "400": error("The body is not a JSON object of valid members for this call; nothing changed.", codes),
});
const EMPTY = (description: string) => ({ description, headers: NO_STORE });
export const STREAM_ID = { type: "string", minLength: 1, maxLength: MAX_STREAM_ID_LENGTH };
/** `stream_id` from the query: when `required`, its absence is a 400 of its own. */
const STREAM_ID_QUERY = <R extends boolean>(required: R) => ({
  doc: { name: "stream_id", in: "query", required, schema: STREAM_ID },
  read: (c: Context): R extends true ? string : string | null => {
    const id = c.req.query("stream_id");
    if (id !== undefined) return streamIdOf(id);
    if (required) throw streamIdRequired();
    return null as R extends true ? string : string | null;
  },
});
const STREAM_CHANGE = {
  type: "object",
  properties: {
    stream_id: STREAM_ID,
    events_requested: { type: "array", items: { type: "string" }, maxItems: MAX_EVENT_TYPES },
    delivery: ref("schemas/Delivery"),
    description: { type: ["string", "null"], maxLength: MAX_DESCRIPTION_LENGTH },
  },
};
const STATUS_BODY = {
  type: "object",
  required: ["stream_id", "status"],
  properties: {
    stream_id: STREAM_ID,
    status: { enum: [...STATUSES] },
    reason: { type: "string", maxLength: MAX_STATUS_REASON_LENGTH },
  },
  additionalProperties: false,
};
const SUBJECT_BODY = {
  type: "object",
  required: ["stream_id", "subject"],
  properties: { stream_id: STREAM_ID, subject: { type: "object" }, verified: { type: "boolean" } },
};

/** A JSON object as `schema` says, read by `of`: the body's one reading and its document. */
const jsonBody = <T>(schema: JsonObject, of: (input: Record<string, unknown>, c: Context<StreamEnv>) => T) => ({
  doc: { required: true, content: json(schema) },
  read: async (c: Context<StreamEnv>) => of(jsonObject(await c.req.text()), c),
});

/** A body naming a stream by `stream_id`, and what `of` reads of the rest. */
const streamBody = <T>(schema: JsonObject, of: (input: Record<string, unknown>, c: Context<StreamEnv>) => T) =>
  jsonBody(schema, (input, c) => ({ streamId: streamIdOf(input.stream_id), ...of(input, c) }));

function allowPrivatePush(c: Context<StreamEnv>): boolean {
  return c.env.SSF_ALLOW_PRIVATE_PUSH === "true";
}

/** An update (PATCH: absent properties stay) or a replace (PUT: absent ones are deleted). */
async function change(
  c: Context<StreamEnv>,
  { streamId, input }: { streamId: string; input: Record<string, unknown> },
  merge: boolean,
) {
  return c.json(streamFound(receiverAnswer(await editStream(c.var.call, streamId, input, merge, allowPrivatePush(c)))));
}

/** The subject's user, by this transmitter's issuer. */
const SUBJECT = streamBody(SUBJECT_BODY, (input, c) => ({
  userId: userOfSubject(input.subject, c.var.call.transmitter.issuer),
}));

/** Add (200, empty) or remove (204) a subject; an unknown user is accepted all the same, so no user is revealed. */
async function subject(
  c: Context<StreamEnv>,
  { streamId, userId }: { streamId: string; userId: string },
  included: boolean,
) {
  streamFound(receiverAnswer(await updateSubject(c.var.call, streamId, userId, included)));
  return included ? c.body(null, 200) : c.body(null, 204);
}

/** PATCH and PUT of a stream: the same body and answers, a different rule for absent members. */
const STREAM_CHANGED = {
  body: streamBody({ ...STREAM_CHANGE, required: ["stream_id"] }, (input) => ({ input })),
  answers: {
    "200": ok("The whole stream after the change.", ref("schemas/Stream")),
    ...BAD_BODY(["invalid_request_body", "invalid_delivery"]),
  },
};

export const STREAMS_ROUTES = [
  declare({
    method: "get",
    path: STREAMS_PATH,
    credential: RECEIVER,
    operationId: "readStreams",
    summary: "The receiver's streams (SSF 1.0 §8.1.1.2): all of them, or one by stream_id",
    parameters: { streamId: STREAM_ID_QUERY(false) },
    answers: {
      "200": ok("Without stream_id an array (maybe empty), oldest first; with it, that stream.", {
        oneOf: [ref("schemas/Stream"), { type: "array", items: ref("schemas/Stream") }],
      }),
      ...BAD_BODY(),
    },
    handler: async (c, { streamId }) => {
      if (streamId === null) return c.json(receiverAnswer(await listStreams(c.var.call)));
      return c.json(streamFound(receiverAnswer(await getStream(c.var.call, streamId))));
    },
  }),
  declare({
    method: "post",
    path: STREAMS_PATH,
    credential: RECEIVER,
    operationId: "createStream",
    summary: "Creates a stream (SSF 1.0 §8.1.1.1); without delivery, a poll stream",
    body: jsonBody(STREAM_CHANGE, (input, c) => streamRequestOf(input, allowPrivatePush(c))),
    answers: {
      "201": ok("The new stream, enabled.", ref("schemas/Stream")),
      ...BAD_BODY(["invalid_request_body", "invalid_delivery"]),
      "403": error("The receiver has 10 streams already; nothing changed.", ["stream_limit_reached"]),
    },
    handler: async (c, { body: request }) => {
      const stream = receiverAnswer(await addStream(c.var.call, request));
      if (!stream) throw streamLimitReached();
      return c.json(stream, 201);
    },
  }),
  declare({
    method: "patch",
    path: STREAMS_PATH,
    credential: RECEIVER,
    operationId: "updateStream",
    summary: "Changes the receiver-supplied properties the body names (SSF 1.0 §8.1.1.3)",
    ...STREAM_CHANGED,
    handler: (c, { body }) => change(c, body, true),
  }),
  declare({
    method: "put",
    path: STREAMS_PATH,
    credential: RECEIVER,
    operationId: "replaceStream",
    summary: "Replaces the receiver-supplied properties; absent ones are deleted (SSF 1.0 §8.1.1.4)",
    ...STREAM_CHANGED,
    handler: (c, { body }) => change(c, body, false),
  }),
  declare({
    method: "delete",
    path: STREAMS_PATH,
    credential: RECEIVER,
    operationId: "deleteStream",
    summary: "Deletes a stream, its subjects and the SETs waiting for it (SSF 1.0 §8.1.1.5)",
    parameters: { streamId: STREAM_ID_QUERY(true) },
    answers: {
      "204": EMPTY("Deleted."),
      ...BAD_BODY(["stream_id_required", "invalid_request_body"]),
    },
    handler: async (c, { streamId }) => {
      streamFound(receiverAnswer(await removeStream(c.var.call, streamId)));
      return c.body(null, 204);
    },
  }),
  declare({
    method: "get",
    path: `${STREAMS_PATH}/status`,
    credential: RECEIVER,
    operationId: "getStreamStatus",
    summary: "A stream's status (SSF 1.0 §8.1.2.1)",
    parameters: { streamId: STREAM_ID_QUERY(true) },
    answers: {
      "200": ok("The status, and its reason when one was given.", STATUS_BODY),
      ...BAD_BODY(["stream_id_required", "invalid_request_body"]),
    },
    handler: async (c, { streamId }) => c.json(streamFound(receiverAnswer(await getStatus(c.var.call, streamId)))),
  }),
  declare({
    method: "post",
    path: `${STREAMS_PATH}/status`,
    credential: RECEIVER,
    operationId: "setStreamStatus",
    summary: "Enables, pauses (SETs are held) or disables (SETs are dropped) a stream (SSF 1.0 §8.1.2.2)",
    body: streamBody(STATUS_BODY, statusOf),
    answers: { "200": ok("The status now.", STATUS_BODY), ...BAD_BODY() },
    handler: async (c, { body: { streamId, status, reason } }) => {
      return c.json(streamFound(receiverAnswer(await updateStatus(c.var.call, streamId, status, reason))));
    },
  }),
  declare({
    method: "post",
    path: `${STREAMS_PATH}/subjects/add`,
    credential: RECEIVER,
    operationId: "addSubject",
    summary: "Narrows the stream to the users added (SSF 1.0 §8.1.3.2)",
    description:
      "A stream starts with every user. Once a user is added it carries only the users added (and not removed since). The subject: `iss_sub` with this issuer, `opaque`, or `complex` with such a `user`. An unknown user is accepted all the same: the answer reveals no account.",
    body: SUBJECT,
    answers: { "200": EMPTY("Added."), ...BAD_BODY(["invalid_request_body", "invalid_subject"]) },
    handler: (c, { body }) => subject(c, body, true),
  }),
  declare({
    method: "post",
    path: `${STREAMS_PATH}/subjects/remove`,
    credential: RECEIVER,
    operationId: "removeSubject",
    summary: "Stops the stream's events about a user (SSF 1.0 §8.1.3.3)",
    body: SUBJECT,
    answers: { "204": EMPTY("Removed."), ...BAD_BODY(["invalid_request_body", "invalid_subject"]) },
    handler: (c, { body }) => subject(c, body, false),
  }),
  declare({
    method: "post",
    path: `${STREAMS_PATH}/verify`,
    credential: RECEIVER,
    operationId: "verifyStream",
    summary: "Queues a verification SET echoing `state` (SSF 1.0 §8.1.4.2)",
    body: streamBody(
      {
        type: "object",
        required: ["stream_id"],
        properties: { stream_id: STREAM_ID, state: { type: "string", maxLength: MAX_STATE_LENGTH } },
      },
      (input) => ({ state: stateOf(input) }),
    ),
    answers: {
      "204": EMPTY("Queued (a disabled stream queues nothing); delivered like any SET of the stream."),
      ...BAD_BODY(),
      "429": error(
        `\`verification_too_frequent\`: the last verification was less than ${MIN_VERIFICATION_INTERVAL_SECONDS} s ago. \`rate_limited\`: too many refused credentials from this IP.`,
        ["verification_too_frequent", "rate_limited"],
        { "Retry-After": ref("headers/RetryAfter") },
      ),
    },
    handler: async (c, { body: { streamId, state } }) => {
      const wait = streamFound(receiverAnswer(await verifyStream(c.var.call, streamId, state)));
      if (wait > 0) throw verificationTooFrequent(wait);
      return c.body(null, 204);
    },
  }),
  declare({
    method: "post",
    path: `${STREAMS_PATH}/poll/:streamId`,
    credential: RECEIVER,
    operationId: "pollStream",
    summary: "Acknowledges SETs and fetches the next ones (RFC 8936)",
    description: `Acknowledged and refused (\`setErrs\`) SETs are forgotten; then up to \`maxEvents\` (at most ${MAX_POLL_EVENTS}) of the oldest waiting ones are signed and handed out. One not acknowledged is handed out again a minute later. A paused stream hands out nothing. Answers at once: \`returnImmediately\` false is honoured as a long poll of zero seconds.`,
    parameters: {
      streamId: {
        doc: { name: "streamId", in: "path", required: true, schema: STREAM_ID },
        read: (c) => streamIdOf(c.req.param("streamId")),
      },
    },
    body: jsonBody(
      {
        type: "object",
        properties: {
          maxEvents: { type: "integer", minimum: 0 },
          returnImmediately: { type: "boolean" },
          ack: { type: "array", items: { type: "string" } },
          setErrs: { type: "object" },
        },
      },
      pollRequestOf,
    ),
    answers: {
      "200": ok("The SETs, by jti.", {
        type: "object",
        required: ["sets", "moreAvailable"],
        properties: {
          sets: { type: "object", additionalProperties: { type: "string" } },
          moreAvailable: { type: "boolean" },
        },
        additionalProperties: false,
      }),
      ...BAD_BODY(),
    },
    handler: async (c, { streamId, body: request }) => {
      return c.json(streamFound(receiverAnswer(await pollStream(c.var.call, streamId, request))));
    },
  }),
] as const;
