import { DEVICE_TYPES } from "../domain/device.ts";
import { REFRESH_PATH } from "../domain/device-binding.ts";
import { EVENT_TYPES, EVENTS_LISTED } from "../domain/events.ts";
import { JWS_ALGORITHMS } from "../domain/jws.ts";
import { MAX_REASON_LENGTH } from "../domain/reason.ts";
import { INBOUND_PATH, MAX_SET_BYTES, SET_ERROR_CODES, SET_MEDIA_TYPE } from "../domain/ssf/inbound.ts";
import {
  DELIVERY_URNS,
  EVENTS_SUPPORTED,
  MAX_POLL_EVENTS,
  MIN_VERIFICATION_INTERVAL_SECONDS,
  STATUSES,
  STREAMS_PATH,
} from "../domain/ssf/streams.ts";
import { CONFIGURATION_PATH, DISCOVERY_MAX_AGE_SECONDS, JWKS_PATH } from "../domain/ssf/transmitter.ts";
import { MAX_SUPPORT_REASON_LENGTH } from "../domain/support.ts";
import { TOKEN_LENGTH } from "../domain/token.ts";
import { MAX_USER_ID_LENGTH } from "../domain/user-id.ts";
import { MAX_USER_AGENT_LENGTH } from "../services/issue-session.ts";
import { type ErrorCode, MESSAGES } from "./error-codes.ts";

// The OpenAPI 3.1 description of the HTTP API, served at GET /openapi.json. Every response
// the test suite receives is validated against it (test/openapi.ts), so it cannot drift.

type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json };
export type JsonObject = { readonly [key: string]: Json };
/** Status code → Response Object (or a `$ref` to one). */
export type Responses = Readonly<Record<string, JsonObject>>;

export const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface Operation extends JsonObject {
  readonly responses: Responses;
}

export type PathItem = { readonly [M in HttpMethod]?: Operation } & {
  readonly parameters?: readonly JsonObject[];
  /** Any method the item does not list (HEAD is implied by GET): 405 with `Allow`. */
  readonly "x-other-methods"?: Responses;
};

export interface OpenApiDocument {
  readonly openapi: "3.1.0";
  readonly info: JsonObject;
  readonly servers: readonly JsonObject[];
  readonly paths: Readonly<Record<string, PathItem>>;
  readonly components: Readonly<Record<"schemas" | "headers" | "parameters" | "securitySchemes", JsonObject>>;
  /** Answered to any request, routed or not, besides what its operation lists. */
  readonly "x-any-request": Responses;
  /** Answered to a path no item describes (or a method a non-/auth/ item does not list). */
  readonly "x-unknown-path": Responses;
  /** Answered to OPTIONS on any path when `Origin` is in ALLOWED_ORIGINS. */
  readonly "x-cors-preflight": Responses;
}

const ref = (pointer: string) => ({ $ref: `#/components/${pointer}` });
const json = (schema: JsonObject) => ({ "application/json": { schema } });
const NO_STORE = { "Cache-Control": ref("headers/NoStore") };
const CLEARS_COOKIE = { "Set-Cookie": ref("headers/ClearedCookie") };
const CHALLENGE = { "WWW-Authenticate": ref("headers/WWWAuthenticate") };
const PUBLIC_CACHE = {
  "Cache-Control": {
    required: true,
    description: "Public: it changes only with a deployment or a key rotation.",
    schema: { const: `public, max-age=${DISCOVERY_MAX_AGE_SECONDS}` },
  },
};

// Bodies are whole inline schemas with `const` values, not `allOf` refinements of a shared
// schema: generated clients (openapi-typescript) then type `code` as required and each
// message as its literal.
const errorBody = (code: ErrorCode): JsonObject => ({
  type: "object",
  required: ["code", "message"],
  properties: { code: { const: code }, message: { const: MESSAGES[code] } },
  additionalProperties: false,
});

/** An error response whose `code` is one of `codes`; every /auth/ response is no-store. */
function error(description: string, codes: readonly ErrorCode[], headers: JsonObject = {}, noStore = true): JsonObject {
  const [only] = codes;
  return {
    description,
    headers: { ...(noStore ? NO_STORE : {}), ...headers },
    content: json(codes.length === 1 && only ? errorBody(only) : { oneOf: codes.map(errorBody) }),
  };
}

function ok(description: string, schema: JsonObject, headers: JsonObject = {}): JsonObject {
  return { description, headers: { ...NO_STORE, ...headers }, content: json(schema) };
}

/** A `{message}` body with a fixed (or patterned) message. */
const message = (value: JsonObject) => ({
  type: "object",
  required: ["message"],
  properties: { message: { type: "string", ...value } },
  additionalProperties: false,
});

const anyRequest = (noStore: boolean) => ({
  "414": error("The path is longer than 8192 characters (checked before routing).", ["uri_too_long"], {}, noStore),
  "500": error(
    "Unexpected failure. Clears no cookie, so a failed logout can be retried.",
    ["internal_error"],
    {},
    noStore,
  ),
});
/** Every /auth/ operation reads or writes D1, so any of them can find it unavailable. */
const AUTH_ERRORS = {
  ...anyRequest(true),
  "503": error(
    "`service_unavailable`: the database is overloaded or did not answer (twice); a write may or may not have taken effect, and the retry's answer says which state holds now. `moving`: the user's sessions are being moved to another database, for a second or so; nothing was changed. Retry after `Retry-After` seconds. Like a 500, it clears no cookie.",
    ["service_unavailable", "moving"],
    { "Retry-After": ref("headers/RetryAfter") },
  ),
};
const RATE_LIMITED = {
  "429": error("Too many refused tokens from this client IP; the refusal it would have been.", ["rate_limited"], {
    "Retry-After": ref("headers/RetryAfter"),
  }),
};
/** Logouts clear a cookie the request carried, refusals included (429 too). */
const LOGOUT_RATE_LIMITED = {
  "429": error("Too many refused tokens from this client IP. Clears a carried cookie.", ["rate_limited"], {
    "Retry-After": ref("headers/RetryAfter"),
    ...CLEARS_COOKIE,
  }),
};
const CROSS_SITE = {
  "403": error(
    "Authenticated by the cookie alone, from another site (`Sec-Fetch-Site: cross-site`, or an `Origin` that is neither this origin nor in ALLOWED_ORIGINS).",
    ["cross_site_request"],
  ),
};
/** The cross-site 403, and a support session asking for what only the user may do (src/domain/support.ts). */
const CROSS_SITE_OR_SUPPORT = {
  "403": error(
    "`cross_site_request`: as for every cookie-authenticated write. `support_session_refused`: the token is a support session's, which cannot do this (it may end only itself); nothing changed, the cookie stays.",
    ["cross_site_request", "support_session_refused"],
  ),
};
// Inline, not a component: only the x-other-methods extensions use it, and a component
// nothing in `paths` references is an error to OpenAPI tools.
const ALLOW_HEADER = {
  required: true,
  description: "The methods the path answers.",
  schema: { type: "string", pattern: "^[A-Z]+(, [A-Z]+)*$" },
};
const METHOD_NOT_ALLOWED = {
  "405": error(
    "A method the path does not answer; nothing changes, whatever the credentials.",
    ["method_not_allowed"],
    {
      Allow: ALLOW_HEADER,
    },
  ),
};
const BEARER_OR_COOKIE: Json = [{ bearer: [] }, { sessionCookie: [] }];
const NO_TOKEN = "No Bearer token or session cookie, or one that is malformed, unknown, expired or revoked.";
const HELD =
  "Or (reauthentication_required) the caller's session was used from another browser or OS (or network, as SESSION_CONTEXT_DEVICE and SESSION_CONTEXT_NETWORK say) than last seen and is held until the user signs in again (`reauthenticate`): nothing read or changed, RFC 9470 challenge.";

// The Shared Signals management API: a receiver's credential, its errors, its bodies.
const RECEIVER: Json = [{ receiver: [] }];
const STREAM_ERRORS = {
  "401": error("No receiver credential, or one that is malformed, unknown or revoked.", ["invalid_token"], CHALLENGE),
  "404": error(
    "`not_found`: no transmitter is configured (SSF_ISSUER is empty). `stream_not_found`: no stream with this id belongs to this receiver. Nothing changed.",
    ["not_found", "stream_not_found"],
  ),
  "413": error("The body is over 16 KiB; nothing changed.", ["body_too_large"]),
  ...RATE_LIMITED,
  ...AUTH_ERRORS,
};
const BAD_BODY = (codes: readonly ErrorCode[] = ["invalid_request_body"]) => ({
  "400": error("The body is not a JSON object of valid members for this call; nothing changed.", codes),
});
const EMPTY = (description: string) => ({ description, headers: NO_STORE });
const requestBody = (schema: JsonObject) => ({ required: true, content: json(schema) });
const STREAM_ID = { type: "string", minLength: 1, maxLength: 64 };
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
    events_requested: { type: "array", items: { type: "string" }, maxItems: 32 },
    delivery: ref("schemas/Delivery"),
    description: { type: ["string", "null"], maxLength: 256 },
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
  properties: { stream_id: STREAM_ID, status: { enum: [...STATUSES] }, reason: { type: "string", maxLength: 256 } },
  additionalProperties: false,
};
const SUBJECT_BODY = {
  type: "object",
  required: ["stream_id", "subject"],
  properties: { stream_id: STREAM_ID, subject: { type: "object" }, verified: { type: "boolean" } },
};

export const openApiDocument: OpenApiDocument = {
  openapi: "3.1.0",
  info: {
    title: "Session service",
    version: "0.1.0",
    description:
      "Lists a signed-in user's sessions and ends them. Errors are `{code, message}`; clients branch on `code`. Every response under /auth/ carries `Cache-Control: no-store`. A method an /auth/ path does not list answers 405 with `Allow` built from the methods it lists (see `x-other-methods`); HEAD is answered wherever GET is.",
  },
  servers: [{ url: "/", description: "The origin that serves this document." }],
  paths: {
    "/auth/sessions": {
      get: {
        operationId: "listSessions",
        summary: "The caller's live sessions, newest first",
        security: BEARER_OR_COOKIE,
        responses: {
          "200": ok(
            "Live sessions (`expires_at` in the future), newest `created_at` first, ties by `id` descending.",
            ref("schemas/SessionList"),
          ),
          "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
          ...CROSS_SITE,
          ...RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      delete: {
        operationId: "deleteSessionWithoutId",
        summary: "Always refused: the session id is missing (after authentication)",
        security: BEARER_OR_COOKIE,
        responses: {
          "400": error("Authenticated, but no session id was given.", ["session_id_required"]),
          "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
          ...CROSS_SITE,
          ...RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      "x-other-methods": METHOD_NOT_ALLOWED,
    },
    "/auth/sessions/{id}": {
      parameters: [ref("parameters/SessionId")],
      delete: {
        operationId: "deleteSession",
        summary: "Ends one of the caller's sessions",
        security: BEARER_OR_COOKIE,
        responses: {
          "200": ok(
            "The session ended. Clears the cookie when it was the caller's own session.",
            message({ const: "Session deleted" }),
            CLEARS_COOKIE,
          ),
          "400": error("Authenticated, but the id is empty or blank.", ["session_id_required"]),
          "401": error(
            `${NO_TOKEN} Or (not_authorized) the id is unknown, expired, or another user's session. Or (reauthentication_required, only with SESSION_STEP_UP_MAX_AGE_SECONDS set) the id is another session and the caller's last authentication is older than that: nothing ended, sign in again (RFC 9470 challenge with max_age). ${HELD} Deleting its own session is never held back.`,
            ["invalid_token", "not_authorized", "reauthentication_required"],
            CHALLENGE,
          ),
          ...CROSS_SITE_OR_SUPPORT,
          ...RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      "x-other-methods": METHOD_NOT_ALLOWED,
    },
    "/auth/logout": {
      post: {
        operationId: "logout",
        summary: "Ends the session that makes the request",
        security: BEARER_OR_COOKIE,
        responses: {
          "200": ok(
            "Logged out. Clears the cookie when the request carried it.",
            message({ const: "Logged out" }),
            CLEARS_COOKIE,
          ),
          "400": error(
            "The token is malformed, unknown, expired or revoked. Clears a carried cookie.",
            ["session_invalid"],
            CLEARS_COOKIE,
          ),
          "401": error("No token at all.", ["token_required"], CHALLENGE),
          ...CROSS_SITE,
          ...LOGOUT_RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      delete: {
        operationId: "logoutAll",
        summary: "Ends every session of the caller's user, or with scope=others every other one",
        security: BEARER_OR_COOKIE,
        parameters: [ref("parameters/Scope")],
        responses: {
          "200": ok(
            "Logged out. Clears a carried cookie, except with scope=others (the caller stays signed in).",
            message({
              anyOf: [
                { const: "Logged out of all sessions" },
                { pattern: "^Logged out of (1 other session|(0|[2-9]|[1-9][0-9]+) other sessions)$" },
              ],
            }),
            CLEARS_COOKIE,
          ),
          "400": error(
            "The token is malformed (session_invalid); or `scope` is neither omitted nor `others` (invalid_scope: checked once the token proved live, so a dead token still gets the 401 session_invalid; nothing ends). Either clears a carried cookie.",
            ["invalid_scope", "session_invalid"],
            CLEARS_COOKIE,
          ),
          "401": error(
            `No token at all (token_required); or a well-formed token that is unknown, expired or revoked, whatever the \`scope\` (session_invalid, clears a carried cookie); or, only with scope=others and SESSION_STEP_UP_MAX_AGE_SECONDS set, a live token whose last authentication is older than that (reauthentication_required: nothing ended, cookie kept, RFC 9470 challenge with max_age). ${HELD} Cookie kept; POST /auth/logout is never held back.`,
            ["token_required", "session_invalid", "reauthentication_required"],
            {
              ...CHALLENGE,
              ...CLEARS_COOKIE,
            },
          ),
          ...CROSS_SITE_OR_SUPPORT,
          ...LOGOUT_RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      "x-other-methods": METHOD_NOT_ALLOWED,
    },
    "/auth/events": {
      get: {
        operationId: "listEvents",
        summary: "The security log of the caller's user: sessions created and ended, newest first",
        security: BEARER_OR_COOKIE,
        responses: {
          "200": ok(
            `At most ${EVENTS_LISTED} events, newest \`created_at\` first, ties by \`id\` descending.`,
            ref("schemas/EventList"),
          ),
          "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
          ...CROSS_SITE,
          ...RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      "x-other-methods": METHOD_NOT_ALLOWED,
    },
    "/auth/dbsc/registration": {
      post: {
        operationId: "registerDeviceBinding",
        summary: "Binds the session to the browser's key (DBSC registration; the browser calls it, not a page)",
        description:
          "Called by a DBSC browser after a login response carrying `Secure-Session-Registration` (SessionService.create with `deviceBound: true`). `Secure-Session-Response` is the browser's proof: a JWT with `typ` `dbsc+jwt`, ES256 or RS256, its public key in the `jwk` header, and `jti` the challenge the login issued. From then on the session's token proves it only together with the live bound cookie. One D1 round trip; logged `device_bound`.",
        security: [{ sessionCookie: [] }],
        parameters: [ref("parameters/SecureSessionResponse")],
        responses: {
          "200": ok(
            "Bound: the session instructions and the next challenge. The bound cookie is the one the login response set (`boundCookie` of SessionService.create); the browser renews it at refresh.",
            ref("schemas/DeviceSessionInstructions"),
            { "Secure-Session-Challenge": ref("headers/SecureSessionChallenge") },
          ),
          "400": error(
            "The proof is missing or malformed, its signature does not verify with its key, or its `jti` is not the challenge this session was issued (or that challenge was already used). Nothing changed.",
            ["device_proof_invalid"],
          ),
          "401": error(
            `No session cookie (token_required), or one that is malformed, unknown, expired or revoked (invalid_token). ${HELD}`,
            ["token_required", "invalid_token", "reauthentication_required"],
            CHALLENGE,
          ),
          "409": error("The session is already bound to a key; nothing changed.", ["device_already_bound"]),
          ...CROSS_SITE_OR_SUPPORT,
          ...RATE_LIMITED,
          ...AUTH_ERRORS,
        },
      },
      "x-other-methods": METHOD_NOT_ALLOWED,
    },
    "/auth/dbsc/refresh": {
      post: {
        operationId: "refreshDeviceBinding",
        summary: "Renews a device-bound session's bound cookie against a fresh proof (DBSC refresh)",
        description:
          "Called by the browser whenever the bound cookie is missing. Without a proof, or with one over a stale challenge or signed by another key: 403 with a new challenge. With a proof by the session's key over its current challenge: a new bound cookie; the challenge is then used up. Not activity: `last_active_at` and the expiry do not change. One D1 round trip.",
        security: [{ sessionCookie: [] }],
        parameters: [ref("parameters/SecSecureSessionId"), ref("parameters/SecureSessionResponse")],
        responses: {
          "200": ok(
            'Either the session instructions with a new bound cookie (and the next challenge), or `{"continue": false}`: the session ended, expired or idled out (both cookies cleared), or this browser\'s binding belongs to another or an unbound session (the bound cookie cleared). The browser then stops refreshing.',
            { oneOf: [ref("schemas/DeviceSessionInstructions"), ref("schemas/DeviceSessionEnded")] },
            {
              "Set-Cookie": ref("headers/BoundCookie"),
              "Secure-Session-Challenge": ref("headers/NextChallenge"),
            },
          ),
          "400": error("No `Sec-Secure-Session-Id`: not a browser's refresh.", ["device_proof_invalid"]),
          "403": error(
            "Prove possession: sign the challenge in `Secure-Session-Challenge` with the session's key. Nothing else changed.",
            ["device_proof_required"],
            { "Secure-Session-Challenge": ref("headers/SecureSessionChallenge") },
          ),
          ...AUTH_ERRORS,
        },
      },
      "x-other-methods": METHOD_NOT_ALLOWED,
    },
    [CONFIGURATION_PATH]: {
      get: {
        operationId: "getSsfConfiguration",
        summary: "Shared Signals transmitter configuration metadata (OpenID SSF 1.0)",
        security: [],
        responses: {
          "200": {
            description: "What a receiver discovers first: the issuer its SETs carry and where their keys are.",
            headers: PUBLIC_CACHE,
            content: json({
              type: "object",
              required: [
                "spec_version",
                "issuer",
                "jwks_uri",
                "delivery_methods_supported",
                "configuration_endpoint",
                "status_endpoint",
                "add_subject_endpoint",
                "remove_subject_endpoint",
                "verification_endpoint",
                "authorization_schemes",
              ],
              properties: {
                spec_version: { const: "1_0" },
                issuer: { type: "string", format: "uri" },
                jwks_uri: { type: "string", format: "uri" },
                delivery_methods_supported: { const: [DELIVERY_URNS.push, DELIVERY_URNS.poll] },
                configuration_endpoint: { type: "string", format: "uri" },
                status_endpoint: { type: "string", format: "uri" },
                add_subject_endpoint: { type: "string", format: "uri" },
                remove_subject_endpoint: { type: "string", format: "uri" },
                verification_endpoint: { type: "string", format: "uri" },
                authorization_schemes: { const: [{ spec_urn: "urn:ietf:rfc:6750" }] },
              },
              additionalProperties: false,
            }),
          },
          "404": error("No transmitter is configured (SSF_ISSUER is empty).", ["not_found"], {}, false),
          ...anyRequest(false),
        },
      },
      "x-other-methods": {
        "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
      },
    },
    [JWKS_PATH]: {
      get: {
        operationId: "getSsfJwks",
        summary: "The public keys of the transmitter's signed SETs (RFC 7517 key set)",
        security: [],
        responses: {
          "200": {
            description:
              "The signing key and each key rotated out within its overlap; `kid` names the key a SET's header names.",
            headers: PUBLIC_CACHE,
            content: {
              "application/jwk-set+json": {
                schema: {
                  type: "object",
                  required: ["keys"],
                  properties: {
                    keys: {
                      type: "array",
                      minItems: 1,
                      items: {
                        type: "object",
                        required: ["kty", "kid", "alg", "use"],
                        properties: {
                          kty: { enum: ["EC", "RSA"] },
                          kid: { type: "string" },
                          alg: { enum: [...JWS_ALGORITHMS] },
                          use: { const: "sig" },
                          crv: { const: "P-256" },
                          x: { type: "string" },
                          y: { type: "string" },
                          n: { type: "string" },
                          e: { type: "string" },
                        },
                        additionalProperties: false,
                      },
                    },
                  },
                },
              },
            },
          },
          "404": error("No transmitter is configured (SSF_ISSUER is empty).", ["not_found"], {}, false),
          ...anyRequest(false),
        },
      },
      "x-other-methods": {
        "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
      },
    },
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
          properties: { stream_id: STREAM_ID, state: { type: "string", maxLength: 256 } },
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
    [INBOUND_PATH]: {
      post: {
        operationId: "receiveSecurityEvent",
        summary: "Shared Signals receiver: an upstream transmitter pushes a Security Event Token (RFC 8935)",
        description:
          "The SET's `iss` must be an upstream of SSF_UPSTREAMS; it is verified (ES256 or RS256, `typ` `secevent+jwt`, `aud`, `iat` within the past 24 hours, 60 s of skew) and acted on once per `jti`. CAEP `session-revoked` ends the user's sessions, or only the one its complex subject's `session` names; RISC `account-disabled`, `account-purged`, `credential-compromise` and `sessions-revoked` end every session of the user. Each ending is logged `ended_by_upstream`, reason `<upstream name>:<event>`. One D1 round trip.",
        security: [],
        requestBody: {
          required: true,
          content: {
            [SET_MEDIA_TYPE]: {
              schema: { type: "string", maxLength: MAX_SET_BYTES, description: "The SET as a compact JWS." },
            },
          },
        },
        responses: {
          "202": {
            description:
              "Accepted: acted on, or an event this receiver ignores, or a `jti` received before (answered as the first time, acted on once). No body.",
          },
          "400": {
            description:
              "Refused (RFC 8935 §2.3); nothing is acted on. `invalid_request`: not `application/secevent+jwt`, longer than the bound, not a SET, a wrong `typ`, `iat`, `jti`, events or subject; `invalid_issuer`: `iss` is no upstream; `invalid_key`: `kid` names no key of the issuer, or one that cannot verify the algorithm; `authentication_failed`: the signature does not verify; `invalid_audience`: `aud` does not name this receiver; `access_denied`: an `iss_sub` subject of another issuer.",
            headers: { "Content-Language": { required: true, schema: { const: "en" } } },
            content: json({
              type: "object",
              required: ["err", "description"],
              properties: { err: { enum: [...SET_ERROR_CODES] }, description: { type: "string" } },
              additionalProperties: false,
            }),
          },
          "404": error("No upstream is configured (SSF_UPSTREAMS is empty).", ["not_found"], {}, false),
          ...anyRequest(false),
          "503": error(
            "The user's database is unavailable, or their sessions are being moved; nothing was acted on. The transmitter resends.",
            ["service_unavailable", "moving"],
            { "Retry-After": ref("headers/RetryAfter") },
            false,
          ),
        },
      },
      "x-other-methods": {
        "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
      },
    },
    "/openapi.json": {
      get: {
        operationId: "getOpenApiDocument",
        summary: "This document",
        security: [],
        responses: {
          "200": {
            description: "The OpenAPI 3.1 document.",
            content: json({
              type: "object",
              required: ["openapi", "info", "paths", "components"],
              properties: {
                openapi: { const: "3.1.0" },
                info: { type: "object" },
                paths: { type: "object" },
                components: { type: "object" },
              },
            }),
          },
          ...anyRequest(false),
        },
      },
      "x-other-methods": {
        "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
      },
    },
  },
  components: {
    securitySchemes: {
      receiver: {
        type: "http",
        scheme: "bearer",
        description:
          "A Shared Signals receiver's credential, issued by the operator (`npm run ssf:receivers -- issue`): `<id>.<secret>` like a session token, but good only for the stream management API and poll.",
      },
      bearer: {
        type: "http",
        scheme: "bearer",
        description: `\`Authorization: Bearer <id>.<secret>\` (an opaque id of 22 to 26 URL-safe characters, a dot, a 43-character secret: at most ${TOKEN_LENGTH} characters; scheme case-insensitive). When an Authorization header is present it alone decides: a refused Bearer token never falls back to the cookie. A token whose session was issued for the cookie only (a browser's) is refused as Bearer, as an invalid token.`,
      },
      sessionCookie: {
        type: "apiKey",
        in: "cookie",
        name: "__Host-session",
        description:
          "The same token in the session cookie (name set by SESSION_COOKIE_NAME). Accepted by every /auth/ operation, and only from the same site, unless its session was issued for Bearer only (an app's). A device-bound session's token counts only beside its live bound cookie (`<name>-bound`), and never as a Bearer token.",
      },
    },
    parameters: {
      SessionId: {
        name: "id",
        in: "path",
        required: true,
        description:
          "A session id from the list. Empty or blank: 400 session_id_required; anything else that is not a live session of the caller's user: 401 not_authorized.",
        schema: { type: "string" },
      },
      SecureSessionResponse: {
        name: "Secure-Session-Response",
        in: "header",
        required: false,
        description: "The DBSC proof: a compact JWS, as a structured-field string (quoted or not).",
        schema: { type: "string" },
      },
      SecSecureSessionId: {
        name: "Sec-Secure-Session-Id",
        in: "header",
        required: true,
        description: "The `session_identifier` the registration gave, as a structured-field string.",
        schema: { type: "string" },
      },
      Scope: {
        name: "scope",
        in: "query",
        required: false,
        description:
          "`others`: end every session of the caller's user but the caller's own. Any other value: 400 invalid_scope once the token proved live (nothing ends; a carried cookie is cleared).",
        schema: { type: "string", enum: ["others"] },
      },
    },
    headers: {
      NoStore: { required: true, schema: { type: "string", const: "no-store" } },
      WWWAuthenticate: {
        required: true,
        description:
          'RFC 6750 challenge; `error="invalid_token"` when a token was presented and refused; RFC 9470 `error="insufficient_user_authentication"` with `max_age` when step-up refused a live token whose authentication is too old.',
        schema: {
          type: "string",
          pattern:
            '^Bearer realm="auth"(, error="invalid_token"|, error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="[0-9]+")?$',
        },
      },
      SecureSessionChallenge: {
        required: true,
        description:
          "The challenge the session's next proof must sign, and the session it is for (RFC 9651 string with an `id` parameter).",
        schema: { type: "string", pattern: '^"[A-Za-z0-9_-]{22}";id="[A-Za-z0-9_.-]+"$' },
      },
      NextChallenge: {
        required: false,
        description:
          "With the session instructions: the challenge the next refresh's proof must sign (as `SecureSessionChallenge`).",
        schema: { type: "string", pattern: '^"[A-Za-z0-9_-]{22}";id="[A-Za-z0-9_.-]+"$' },
      },
      BoundCookie: {
        required: true,
        description:
          "Sets the bound cookie (`<session cookie name>-bound`, Max-Age SESSION_BOUND_COOKIE_SECONDS), or clears it (and, when the session ended, the session cookie too).",
        schema: {
          type: "string",
          pattern:
            "^[!#$%&'*+.^_`|~0-9A-Za-z-]+=[A-Za-z0-9_-]*; Max-Age=[0-9]+; Path=/; HttpOnly; Secure; SameSite=Lax(, [!#$%&'*+.^_`|~0-9A-Za-z-]+=; Max-Age=0; Path=/; HttpOnly; Secure; SameSite=Lax)?$",
        },
      },
      RetryAfter: { required: true, description: "Seconds.", schema: { type: "integer", minimum: 1 } },
      ClearedCookie: {
        required: false,
        description: "Clears the session cookie; no response ever sets a non-empty one.",
        schema: {
          type: "string",
          pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+=; Max-Age=0; Path=/; HttpOnly; Secure; SameSite=Lax$",
        },
      },
    },
    schemas: {
      Delivery: {
        oneOf: [
          {
            type: "object",
            required: ["method", "endpoint_url"],
            properties: { method: { const: DELIVERY_URNS.push }, endpoint_url: { type: "string", format: "uri" } },
          },
          {
            type: "object",
            required: ["method"],
            properties: { method: { const: DELIVERY_URNS.poll }, endpoint_url: { type: "string", format: "uri" } },
          },
        ],
      },
      Stream: {
        type: "object",
        description:
          "SSF 1.0 stream configuration. `authorization_header`, given for push, is sent with every push and never shown back.",
        required: [
          "stream_id",
          "iss",
          "aud",
          "events_supported",
          "events_requested",
          "events_delivered",
          "delivery",
          "min_verification_interval",
        ],
        properties: {
          stream_id: STREAM_ID,
          iss: { type: "string", format: "uri" },
          aud: { type: "string" },
          events_supported: { type: "array", items: { enum: [...EVENTS_SUPPORTED] } },
          events_requested: { type: "array", items: { type: "string" } },
          events_delivered: { type: "array", items: { enum: [...EVENTS_SUPPORTED] } },
          delivery: ref("schemas/Delivery"),
          description: { type: "string" },
          min_verification_interval: { const: MIN_VERIFICATION_INTERVAL_SECONDS },
        },
        additionalProperties: false,
      },
      Timestamp: {
        type: "string",
        format: "date-time",
        pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$",
      },
      // Ids are opaque to clients: the contract keeps the shape it published (22 to 26 URL-safe
      // characters, as the bearer scheme says), wider than the ids issued (src/domain/token.ts).
      SessionId: { type: "string", pattern: "^(?:([a-z]{2})?([A-Za-z0-9_-]{2}))?[A-Za-z0-9_-]{22}$" },
      Session: {
        type: "object",
        required: [
          "id",
          "name",
          "ip_address",
          "user_agent",
          "created_at",
          "expires_at",
          "last_active_at",
          "location",
          "device",
        ],
        properties: {
          id: ref("schemas/SessionId"),
          name: {
            type: "string",
            description:
              "Browser and OS parsed from the user agent (`Unknown browser` when it says nothing useful), then ` · ` and the IP when known; `Support access by <agent>` for support access (see `actor`).",
          },
          ip_address: { type: "string", description: '`""` when the address was unknown or not an IP.' },
          user_agent: { type: "string", maxLength: MAX_USER_AGENT_LENGTH },
          created_at: ref("schemas/Timestamp"),
          expires_at: ref("schemas/Timestamp"),
          last_active_at: ref("schemas/Timestamp"),
          location: { type: ["string", "null"], description: "`City, CC` where the edge saw the login, when known." },
          device: {
            type: "object",
            required: ["browser", "os", "type"],
            properties: {
              browser: { type: ["string", "null"] },
              os: { type: ["string", "null"] },
              type: { type: "string", enum: DEVICE_TYPES },
            },
            additionalProperties: false,
          },
          device_bound: {
            const: true,
            description:
              "Present only on a session bound to its browser's key (DBSC): its token works only beside the live bound cookie, so a copied cookie is worthless elsewhere.",
          },
          last_seen: {
            description:
              "Where the session's cookie was last used from (for a session not issued for the cookie, where it signed in): browser family and OS (from the User-Agent, no version), country and network (ASN) as Cloudflare saw them; each null when unknown. Null for a session not used since the service started recording them.",
            anyOf: [ref("schemas/ClientContext"), { type: "null" }],
          },
          actor: {
            type: "object",
            description:
              "Present only on support access: a session a support agent opened on the user's behalf (RFC 8693's actor), named `Support access by <agent>`. It ends at `expires_at` (at most SESSION_SUPPORT_MAX_SECONDS after it opened), never later, and the user can end it like any session. It cannot end the user's other sessions, be re-authenticated or bind a device key.",
            required: ["sub", "reason"],
            properties: {
              sub: { type: "string", maxLength: MAX_USER_ID_LENGTH, description: "The agent's user id." },
              reason: {
                type: "string",
                maxLength: MAX_SUPPORT_REASON_LENGTH,
                description: "Why, as the agent gave it: a ticket or a sentence.",
              },
            },
            additionalProperties: false,
          },
        },
        additionalProperties: false,
      },
      ClientContext: {
        type: "object",
        required: ["browser", "os", "country", "asn"],
        properties: {
          browser: { type: ["string", "null"], description: "Browser family, e.g. `Chrome`." },
          os: { type: ["string", "null"], description: "e.g. `macOS`." },
          country: { type: ["string", "null"], description: "ISO 3166-1 alpha-2, as Cloudflare gives it." },
          asn: { type: ["integer", "null"], description: "The network's autonomous system number." },
        },
        additionalProperties: false,
      },
      SessionList: {
        type: "object",
        required: ["sessions", "currentSessionId"],
        properties: {
          sessions: {
            type: "array",
            items: ref("schemas/Session"),
            minItems: 1,
            description: "The caller's own session is always among them.",
          },
          currentSessionId: ref("schemas/SessionId"),
        },
        additionalProperties: false,
      },
      Event: {
        type: "object",
        required: ["id", "type", "session_id", "actor_session_id", "ip_address", "created_at", "reason", "new_device"],
        properties: {
          id: { type: "integer" },
          type: { type: "string", enum: EVENT_TYPES },
          session_id: ref("schemas/SessionId"),
          actor_session_id: {
            anyOf: [ref("schemas/SessionId"), { type: "null" }],
            description:
              "The session whose token made the request; for `evicted`, the new session that took the user past the cap; null for sessions issued or ended over RPC.",
          },
          ip_address: { type: ["string", "null"] },
          created_at: ref("schemas/Timestamp"),
          reason: {
            type: ["string", "null"],
            maxLength: MAX_REASON_LENGTH,
            description:
              "Type `ended`: why the rest of the system ended the session (e.g. `password_changed`, `account_disabled`, `admin`). Type `ended_by_upstream`: `<upstream name>:<event>`, the upstream transmitter SSF_UPSTREAMS names and its event (e.g. `okta:session-revoked`). Type `context_changed`: the policy that applied, `log` or `step-up` (the session is held until re-authenticated). Type `reauthenticated`: `step-up` when it lifted such a hold. Null otherwise.",
          },
          new_device: {
            type: ["boolean", "null"],
            description:
              "Type `created`: no session of the user seen within the events retention period had the same browser, OS and country; null otherwise.",
          },
          context: {
            type: "object",
            description:
              "Present only on `context_changed`, and on `ended` with reason `context_changed`: where the session was last seen and where it was used from then.",
            required: ["before", "after"],
            properties: { before: ref("schemas/ClientContext"), after: ref("schemas/ClientContext") },
            additionalProperties: false,
          },
          actor: {
            type: "object",
            description:
              "Present only when the event's session is support access (its opening, its end, whoever ended it): the agent acting in it.",
            required: ["sub"],
            properties: { sub: { type: "string", maxLength: MAX_USER_ID_LENGTH } },
            additionalProperties: false,
          },
        },
        additionalProperties: false,
      },
      DeviceSessionInstructions: {
        type: "object",
        description:
          "DBSC session instructions: the session is the whole origin, its one bound credential the bound cookie.",
        required: ["session_identifier", "refresh_url", "scope", "credentials"],
        properties: {
          session_identifier: { type: "string", description: "`<session id>.<base64url of the public key>`." },
          refresh_url: { const: REFRESH_PATH },
          scope: {
            type: "object",
            required: ["include_site"],
            properties: { include_site: { const: false } },
            additionalProperties: false,
          },
          credentials: {
            type: "array",
            minItems: 1,
            maxItems: 1,
            items: {
              type: "object",
              required: ["type", "name", "attributes"],
              properties: {
                type: { const: "cookie" },
                name: { type: "string" },
                attributes: { const: "Path=/; Secure; HttpOnly; SameSite=Lax" },
              },
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
      DeviceSessionEnded: {
        type: "object",
        required: ["session_identifier", "continue"],
        properties: { session_identifier: { type: "string" }, continue: { const: false } },
        additionalProperties: false,
      },
      EventList: {
        type: "object",
        required: ["events"],
        properties: { events: { type: "array", items: ref("schemas/Event"), maxItems: EVENTS_LISTED } },
        additionalProperties: false,
      },
    },
  },
  "x-any-request": anyRequest(false),
  "x-unknown-path": {
    "404": error("No such endpoint.", ["not_found"], {}, false),
  },
  "x-cors-preflight": {
    "204": {
      description:
        "CORS preflight from an origin in ALLOWED_ORIGINS (none by default): credentials and `Authorization` allowed.",
      headers: {
        "Access-Control-Allow-Origin": { required: true, schema: { type: "string" } },
        "Access-Control-Allow-Methods": { required: true, schema: { type: "string" } },
      },
    },
  },
};
