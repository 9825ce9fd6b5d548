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
import { proveCredential } from "../../domain/token.ts";
import {
  type Answer,
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
import type { AppEnv } from "../app-env.ts";
import { bearerToken } from "../credentials.ts";
import type { ErrorCode } from "../error-codes.ts";
import { ApiError, unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import {
  AUTH_ERRORS,
  CHALLENGE,
  error,
  type Json,
  type JsonObject,
  json,
  METHOD_NOT_ALLOWED,
  NO_STORE,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";

// The Shared Signals stream management API (SSF 1.0 §8) and the poll endpoint (RFC 8936),
// for receivers holding a credential from `npm run ssf:receivers`. Every answer is no-store.

type StreamEnv = AppEnv & { Variables: { call: StreamCall } };

const MAX_BODY_BYTES = 16 * 1024;

/** The transmitter must be on (404 otherwise) and the caller a receiver's credential (else 401). */
const requireReceiver = createMiddleware<StreamEnv>(async (c, next) => {
  const transmitter = readTransmitter(c.env);
  if (!transmitter) throw new ApiError(404, "not_found");
  const token = bearerToken(c);
  const proof = token ? await proveCredential(token) : null;
  if (!proof) throw unauthorized("invalid_token", Boolean(token));
  c.set("call", { proof, transmitter, db: c.var.scope.shards.streams().db, at: c.var.scope.at.now });
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

/** The answer's result, or 401 when the credential was refused inside the statement. */
function authenticated<T>(answer: Answer<T>): T {
  if (!answer.receiver) throw unauthorized("invalid_token", true);
  return answer.result;
}

function found<T>(value: T | null | false): T {
  if (value === null || value === false) throw new ApiError(404, "stream_not_found");
  return value;
}

function allowPrivatePush(c: Context<StreamEnv>): boolean {
  return c.env.SSF_ALLOW_PRIVATE_PUSH === "true";
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
  return c.json(found(authenticated(await editStream(c.var.call, streamId, input, merge, allowPrivatePush(c)))));
}

export const streamRoutes = new Hono<StreamEnv>()
  .use(requireReceiver)
  .use(limitBody)
  .get("/", async (c) => {
    const id = c.req.query("stream_id");
    if (id === undefined) return c.json(authenticated(await listStreams(c.var.call)));
    return c.json(found(authenticated(await getStream(c.var.call, streamIdOf(id)))));
  })
  .post("/", async (c) => {
    const request = streamRequestOf(await body(c), allowPrivatePush(c));
    const stream = authenticated(await addStream(c.var.call, request));
    if (!stream) throw new ApiError(403, "stream_limit_reached");
    return c.json(stream, 201);
  })
  .patch("/", (c) => change(c, true))
  .put("/", (c) => change(c, false))
  .delete("/", async (c) => {
    found(authenticated(await removeStream(c.var.call, queryStreamId(c))));
    return c.body(null, 204);
  })
  .get("/status", async (c) => c.json(found(authenticated(await getStatus(c.var.call, queryStreamId(c))))))
  .post("/status", async (c) => {
    const input = await body(c);
    const streamId = streamIdOf(input.stream_id);
    const { status, reason } = statusOf(input);
    return c.json(found(authenticated(await updateStatus(c.var.call, streamId, status, reason))));
  })
  .post("/subjects/add", (c) => subject(c, true))
  .post("/subjects/remove", (c) => subject(c, false))
  .post("/verify", async (c) => {
    const input = await body(c);
    const streamId = streamIdOf(input.stream_id);
    const wait = found(authenticated(await verifyStream(c.var.call, streamId, stateOf(input))));
    if (wait > 0) throw new ApiError(429, "verification_too_frequent", { headers: { "Retry-After": String(wait) } });
    return c.body(null, 204);
  })
  .post("/poll/:streamId", async (c) => {
    const streamId = streamIdOf(c.req.param("streamId"));
    const request = pollRequestOf(await body(c));
    return c.json(found(authenticated(await pollStream(c.var.call, streamId, request))));
  });

/** Add (200, empty) or remove (204) a subject; an unknown user is accepted all the same, so no user is revealed. */
async function subject(c: Context<StreamEnv>, included: boolean) {
  const input = await body(c);
  const streamId = streamIdOf(input.stream_id);
  const userId = userOfSubject(input.subject, c.var.call.transmitter.issuer);
  found(authenticated(await updateSubject(c.var.call, streamId, userId, included)));
  return included ? c.body(null, 200) : c.body(null, 204);
}

// The Shared Signals management API: a receiver's credential, its errors, its bodies.
const RECEIVER: Json = [{ receiver: [] }];
const STREAM_ERRORS = {
  "401": error("No receiver credential, or one that is malformed, unknown or revoked.", ["invalid_token"], CHALLENGE),
  "404": error(
    "`not_found`: no transmitter is configured (SSF_ISSUER is empty). `stream_not_found`: no stream with this id belongs to this receiver. Nothing changed.",
    ["not_found", "stream_not_found"],
  ),
  "413": error(`The body is over ${MAX_BODY_BYTES / 1024} KiB; nothing changed.`, ["body_too_large"]),
  ...RATE_LIMITED,
  ...AUTH_ERRORS,
};
const BAD_BODY = (codes: readonly ErrorCode[] = ["invalid_request_body"]) => ({
  "400": error("The body is not a JSON object of valid members for this call; nothing changed.", codes),
});
const EMPTY = (description: string) => ({ description, headers: NO_STORE });
const requestBody = (schema: JsonObject) => ({ required: true, content: json(schema) });
export const STREAM_ID = { type: "string", minLength: 1, maxLength: MAX_STREAM_ID_LENGTH };
const STREAM_ID_QUERY = (required: boolean) => ({
  name: "stream_id",
  in: "query",
  required,
  schema: STREAM_ID,
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
/** PATCH and PUT of a stream: the same body and answers, a different rule for absent members. */
const streamChange = (operationId: string, summary: string) => ({
  operationId,
  summary,
  security: RECEIVER,
  requestBody: requestBody({ ...STREAM_CHANGE, required: ["stream_id"] }),
  responses: {
    "200": ok("The whole stream after the change.", ref("schemas/Stream")),
    ...BAD_BODY(["invalid_request_body", "invalid_delivery"]),
    ...STREAM_ERRORS,
  },
});
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

/** This file's part of the OpenAPI document (src/http/openapi.ts): the stream management API and poll. */
export const streamsPaths = {
  [`${STREAMS_PATH}`]: {
    get: {
      operationId: "readStreams",
      summary: "The receiver's streams (SSF 1.0 §8.1.1.2): all of them, or one by stream_id",
      security: RECEIVER,
      parameters: [STREAM_ID_QUERY(false)],
      responses: {
        "200": ok("Without stream_id an array (maybe empty), oldest first; with it, that stream.", {
          oneOf: [ref("schemas/Stream"), { type: "array", items: ref("schemas/Stream") }],
        }),
        ...BAD_BODY(),
        ...STREAM_ERRORS,
      },
    },
    post: {
      operationId: "createStream",
      summary: "Creates a stream (SSF 1.0 §8.1.1.1); without delivery, a poll stream",
      security: RECEIVER,
      requestBody: requestBody(STREAM_CHANGE),
      responses: {
        "201": ok("The new stream, enabled.", ref("schemas/Stream")),
        ...BAD_BODY(["invalid_request_body", "invalid_delivery"]),
        "403": error("The receiver has 10 streams already; nothing changed.", ["stream_limit_reached"]),
        ...STREAM_ERRORS,
      },
    },
    patch: streamChange("updateStream", "Changes the receiver-supplied properties the body names (SSF 1.0 §8.1.1.3)"),
    put: streamChange(
      "replaceStream",
      "Replaces the receiver-supplied properties; absent ones are deleted (SSF 1.0 §8.1.1.4)",
    ),
    delete: {
      operationId: "deleteStream",
      summary: "Deletes a stream, its subjects and the SETs waiting for it (SSF 1.0 §8.1.1.5)",
      security: RECEIVER,
      parameters: [STREAM_ID_QUERY(true)],
      responses: {
        "204": EMPTY("Deleted."),
        ...BAD_BODY(["stream_id_required", "invalid_request_body"]),
        ...STREAM_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  [`${STREAMS_PATH}/status`]: {
    get: {
      operationId: "getStreamStatus",
      summary: "A stream's status (SSF 1.0 §8.1.2.1)",
      security: RECEIVER,
      parameters: [STREAM_ID_QUERY(true)],
      responses: {
        "200": ok("The status, and its reason when one was given.", STATUS_BODY),
        ...BAD_BODY(["stream_id_required", "invalid_request_body"]),
        ...STREAM_ERRORS,
      },
    },
    post: {
      operationId: "setStreamStatus",
      summary: "Enables, pauses (SETs are held) or disables (SETs are dropped) a stream (SSF 1.0 §8.1.2.2)",
      security: RECEIVER,
      requestBody: requestBody(STATUS_BODY),
      responses: {
        "200": ok("The status now.", STATUS_BODY),
        ...BAD_BODY(),
        ...STREAM_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  [`${STREAMS_PATH}/subjects/add`]: {
    post: {
      operationId: "addSubject",
      summary: "Narrows the stream to the users added (SSF 1.0 §8.1.3.2)",
      description:
        "A stream starts with every user. Once a user is added it carries only the users added (and not removed since). The subject: `iss_sub` with this issuer, `opaque`, or `complex` with such a `user`. An unknown user is accepted all the same: the answer reveals no account.",
      security: RECEIVER,
      requestBody: requestBody(SUBJECT_BODY),
      responses: {
        "200": EMPTY("Added."),
        ...BAD_BODY(["invalid_request_body", "invalid_subject"]),
        ...STREAM_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  [`${STREAMS_PATH}/subjects/remove`]: {
    post: {
      operationId: "removeSubject",
      summary: "Stops the stream's events about a user (SSF 1.0 §8.1.3.3)",
      security: RECEIVER,
      requestBody: requestBody(SUBJECT_BODY),
      responses: {
        "204": EMPTY("Removed."),
        ...BAD_BODY(["invalid_request_body", "invalid_subject"]),
        ...STREAM_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  [`${STREAMS_PATH}/verify`]: {
    post: {
      operationId: "verifyStream",
      summary: "Queues a verification SET echoing `state` (SSF 1.0 §8.1.4.2)",
      security: RECEIVER,
      requestBody: requestBody({
        type: "object",
        required: ["stream_id"],
        properties: { stream_id: STREAM_ID, state: { type: "string", maxLength: MAX_STATE_LENGTH } },
      }),
      responses: {
        "204": EMPTY("Queued (a disabled stream queues nothing); delivered like any SET of the stream."),
        ...BAD_BODY(),
        ...STREAM_ERRORS,
        "429": error(
          `\`verification_too_frequent\`: the last verification was less than ${MIN_VERIFICATION_INTERVAL_SECONDS} s ago. \`rate_limited\`: too many refused credentials from this IP.`,
          ["verification_too_frequent", "rate_limited"],
          { "Retry-After": ref("headers/RetryAfter") },
        ),
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  [`${STREAMS_PATH}/poll/{streamId}`]: {
    post: {
      operationId: "pollStream",
      summary: "Acknowledges SETs and fetches the next ones (RFC 8936)",
      description: `Acknowledged and refused (\`setErrs\`) SETs are forgotten; then up to \`maxEvents\` (at most ${MAX_POLL_EVENTS}) of the oldest waiting ones are signed and handed out. One not acknowledged is handed out again a minute later. A paused stream hands out nothing. Answers at once: \`returnImmediately\` false is honoured as a long poll of zero seconds.`,
      security: RECEIVER,
      parameters: [{ name: "streamId", in: "path", required: true, schema: STREAM_ID }],
      requestBody: requestBody({
        type: "object",
        properties: {
          maxEvents: { type: "integer", minimum: 0 },
          returnImmediately: { type: "boolean" },
          ack: { type: "array", items: { type: "string" } },
          setErrs: { type: "object" },
        },
      }),
      responses: {
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
        ...STREAM_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;
