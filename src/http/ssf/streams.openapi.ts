import {
  MAX_DESCRIPTION_LENGTH,
  MAX_EVENT_TYPES,
  MAX_POLL_EVENTS,
  MAX_STATE_LENGTH,
  MAX_STATUS_REASON_LENGTH,
  MAX_STREAM_ID_LENGTH,
  MIN_VERIFICATION_INTERVAL_SECONDS,
  STATUSES,
  STREAMS_PATH,
} from "../../domain/ssf/streams.ts";
import type { ErrorCode } from "../error-codes.ts";
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
import { MAX_BODY_BYTES } from "./streams.ts";

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

/** The OpenAPI document's part (src/http/openapi.ts) for streams.ts: the stream management API and poll. */
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
