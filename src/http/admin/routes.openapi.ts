import { ADMIN_SCOPES, type AdminScope } from "../../domain/admin-keys.ts";
import { MAX_REASON_LENGTH } from "../../domain/reason.ts";
import { MAX_SESSION_DATA_BYTES, MAX_SESSION_DATA_DEPTH } from "../../domain/session-data.ts";
import { USER_ID_RULE } from "../../domain/user-id.ts";
import { MESSAGES } from "../error-codes.ts";
import {
  AUTH_ERRORS,
  error,
  type JsonObject,
  json,
  METHOD_NOT_ALLOWED,
  ok,
  type PathItem,
  ref,
} from "../openapi-parts.ts";
import { UPSTREAM_SIGN_IN_INPUT } from "../upstreams/routes.openapi.ts";
import { MAX_ADMIN_BODY_BYTES } from "./routes.ts";

// The admin API's part of the OpenAPI document (src/http/openapi.ts): the SessionService RPC's
// verbs over HTTP, under the `adminKey` security scheme, for servers only.

const ADMIN_CHALLENGE = {
  "WWW-Authenticate": {
    required: true,
    description: 'RFC 6750, realm `admin`: `error="invalid_token"` when a key was presented and refused.',
    schema: { type: "string", pattern: '^Bearer realm="admin"(, error="invalid_token")?$' },
  },
};

/** The 400 of a broken input rule: the contract's body, and the rule as the RPC's error states it. */
const INVALID = {
  "400": {
    description:
      "A user or agent id in the path or a query parameter breaks the RPC method's rule, the path is not percent-encoded UTF-8, or the body is not a JSON object, names a member this call does not take, or has a member that breaks its rule (`detail` says which, as the RPC's TypeError or RangeError would). Nothing was written.",
    headers: { "Cache-Control": ref("headers/NoStore") },
    content: json({
      type: "object",
      required: ["code", "message", "detail"],
      properties: {
        code: { const: "invalid_input" },
        message: { const: MESSAGES.invalid_input },
        detail: { type: "string" },
      },
      additionalProperties: false,
    }),
  },
};
/** The refusals of a body: too large, or not sent as the one media type the operation lists. */
const BODY = {
  "413": error(`The body is over ${MAX_ADMIN_BODY_BYTES / 1024} KiB; nothing was written.`, ["body_too_large"]),
  "415": error("The body is not sent as `application/json` (any parameters; read as UTF-8). Nothing was written.", [
    "unsupported_media_type",
  ]),
};

const OFF = "No admin key is configured (ADMIN_KEYS is unset): the admin API does not exist.";
const OTHER_METHODS = { ...METHOD_NOT_ALLOWED, "404": error(OFF, ["not_found"]) };

/** The answers every admin call shares, for a key that needs `scope`. */
function guarded(scope: AdminScope) {
  return {
    "401": error(
      "No admin key, or one that is malformed, unknown or revoked. Counted against the client's failed-authentication limit.",
      ["invalid_token"],
      ADMIN_CHALLENGE,
    ),
    "403": error(
      `The key does not have the \`${scope}\` scope (RFC 6750 \`insufficient_scope\`).`,
      ["insufficient_scope"],
      {
        "WWW-Authenticate": {
          required: true,
          schema: { const: `Bearer realm="admin", error="insufficient_scope", scope="${scope}"` },
        },
      },
    ),
    "404": error(OFF, ["not_found"]),
    "429": error("Too many refused keys from this client IP.", ["rate_limited"], {
      "Retry-After": ref("headers/RetryAfter"),
    }),
    ...AUTH_ERRORS,
  };
}

function operation(
  scope: AdminScope,
  operationId: string,
  summary: string,
  success: Record<string, JsonObject>,
  body: JsonObject | null,
  parameters: JsonObject[] = [],
) {
  return {
    operationId,
    summary,
    description: `Scope \`${scope}\`. One database round trip; one \`admin_call\` log line naming the key.`,
    // OpenAPI 3.1 lets a non-OAuth scheme name the roles an operation requires: the key's scope.
    security: [{ adminKey: [scope] }],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body ? { requestBody: { required: true, content: json(body) } } : {}),
    responses: { ...guarded(scope), ...INVALID, ...(body ? BODY : {}), ...success },
  };
}

const path = (name: string, description: string) => ({
  name,
  in: "path",
  required: true,
  description,
  schema: { type: "string" },
});
const USER_ID = path("userId", `The user's id (URL-encoded): ${USER_ID_RULE}.`);
const SESSION_ID = path(
  "sessionId",
  "The session's id: any text, as over RPC (one naming no live session answers `false`).",
);
const REASON = {
  type: "string",
  maxLength: MAX_REASON_LENGTH,
  description: "Why, for the security log (e.g. `password_changed`).",
};
// No members but those listed, in a request (a member the call does not take is a 400) and in an answer.
const object = (required: string[], properties: JsonObject) => ({
  type: "object",
  required,
  properties,
  additionalProperties: false,
});

const DATA = {
  type: "object",
  description: `Application data: a JSON object of at most ${MAX_SESSION_DATA_BYTES} bytes, nested at most ${MAX_SESSION_DATA_DEPTH} deep (itself the first level); answered by authenticate and whoami, never listed.`,
};
const UPDATED = {
  "200": ok(
    "Whether a live session had that id (nothing is written when none had).",
    object(["updated"], { updated: { type: "boolean" } }),
  ),
};

const ISSUED = {
  type: "object",
  required: ["id", "token", "expiresAt", "cookie"],
  properties: {
    id: ref("schemas/SessionId"),
    token: { type: "string" },
    expiresAt: { type: "string", format: "date-time" },
    cookie: { type: "string", description: "A ready `Set-Cookie` value for the login response." },
    newDevice: { type: "boolean" },
    secureSessionRegistration: { type: "string" },
    boundCookie: { type: "string" },
  },
  additionalProperties: false,
};

export const adminPaths = {
  "/admin/sessions": {
    post: operation(
      "sessions:create",
      "adminCreateSession",
      "Issue a session (SessionService.create)",
      { "201": ok("The session, its token and the login response's cookie.", ISSUED) },
      object(["userId"], {
        userId: { type: "string" },
        ipAddress: { type: ["string", "null"] },
        userAgent: { type: ["string", "null"] },
        ttlSeconds: { type: "integer" },
        country: { type: ["string", "null"] },
        city: { type: ["string", "null"] },
        asn: { type: ["integer", "null"] },
        region: { type: ["string", "null"] },
        factors: { type: "array" },
        assuranceLevel: { type: ["integer", "null"] },
        deviceBound: { type: "boolean" },
        carrier: { enum: ["cookie", "bearer", "both", null] },
        data: DATA,
        upstream: { ...UPSTREAM_SIGN_IN_INPUT, type: ["object", "null"] },
      }),
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/sessions/reauthenticate": {
    post: operation(
      "sessions:create",
      "adminReauthenticate",
      "Record a new sign-in on a session and give it a new token (SessionService.reauthenticate)",
      {
        "200": ok(
          "The same session with its new token; the old token is dead.",
          object(["sessionId", "token", "expiresAt", "cookie"], {
            sessionId: ref("schemas/SessionId"),
            token: { type: "string" },
            expiresAt: { type: "string", format: "date-time" },
            cookie: { type: "string", description: "A ready `Set-Cookie` value carrying the new token." },
          }),
        ),
        "404": error(
          "The token proves no live session (SessionService.reauthenticate answers null); or no admin key is configured.",
          ["session_not_found", "not_found"],
        ),
      },
      object(["token", "factors"], {
        token: { type: "string" },
        factors: { type: "array" },
        assuranceLevel: { type: ["integer", "null"] },
        cookie: { type: "string" },
        carrier: { enum: ["cookie", "bearer"] },
        context: { type: "object" },
      }),
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/users/{userId}/sessions": {
    get: operation(
      "sessions:read",
      "adminListUserSessions",
      "A user's live sessions, as the user lists them and with the upstream sign-in of each (SessionService.listUserSessions)",
      {
        "200": ok(
          "Newest first; [] for an unknown user.",
          object(["sessions"], { sessions: { type: "array", items: ref("schemas/BackendSession") } }),
        ),
      },
      null,
      [USER_ID, { name: "region", in: "query", required: false, schema: { type: "string" } }],
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/users/{userId}/sessions/end": {
    post: operation(
      "sessions:end",
      "adminEndUserSessions",
      "End a user's sessions, or all but one (SessionService.endUserSessions)",
      { "200": ok("How many ended.", object(["ended"], { ended: { type: "integer", minimum: 0 } })) },
      object(["reason"], {
        reason: REASON,
        exceptSessionId: { type: ["string", "null"] },
        region: { type: ["string", "null"] },
      }),
      [USER_ID],
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/sessions/{sessionId}/end": {
    post: operation(
      "sessions:end",
      "adminEndSession",
      "End one session (SessionService.endSession)",
      { "200": ok("Whether a live session had that id.", object(["ended"], { ended: { type: "boolean" } })) },
      object(["reason"], { reason: REASON }),
      [SESSION_ID],
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/support-sessions": {
    post: operation(
      "support",
      "adminOpenSupportSession",
      "Open support access to a user's account for an agent (SessionService.openSupportSession)",
      { "201": ok("The support session and its token.", ISSUED) },
      object(["userId", "agentId", "reason"], {
        userId: { type: "string" },
        agentId: { type: "string" },
        reason: { type: "string" },
        ttlSeconds: { type: "integer" },
        region: { type: ["string", "null"] },
        data: DATA,
      }),
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/sessions/{sessionId}/data": {
    put: operation(
      "sessions:data",
      "adminReplaceSessionData",
      "Replace a session's application data (SessionService.updateSessionData, mode replace)",
      UPDATED,
      { ...DATA, description: "The new data, whole; `{}` clears it." },
      [SESSION_ID],
    ),
    patch: operation(
      "sessions:data",
      "adminMergeSessionData",
      "Merge an RFC 7396 JSON Merge Patch into a session's application data (SessionService.updateSessionData, mode merge)",
      UPDATED,
      { ...DATA, description: "The patch: each member replaces its key, a null member deletes it, objects merge." },
      [SESSION_ID],
    ),
    "x-other-methods": OTHER_METHODS,
  },
  "/admin/agents/{agentId}/support-sessions/end": {
    post: operation(
      "support",
      "adminEndSupportSessions",
      "End every open support session of an agent (SessionService.endSupportSessions)",
      {
        "200": ok(
          "How many ended, and how many were in a bucket being moved (call again).",
          object(["ended", "moving"], {
            ended: { type: "integer", minimum: 0 },
            moving: { type: "integer", minimum: 0 },
          }),
        ),
      },
      object(["reason"], { reason: REASON }),
      [path("agentId", `The agent's user id: ${USER_ID_RULE}.`)],
    ),
    "x-other-methods": OTHER_METHODS,
  },
} as const satisfies Record<string, PathItem>;

export const adminKeyScheme = {
  type: "http",
  scheme: "bearer",
  description: `An admin key (\`ssak_<id>.<secret>\`, from \`npm run admin:keys -- create\`), for servers only: never in a browser. Scopes: ${ADMIN_SCOPES.map((scope) => `\`${scope}\``).join(", ")}.`,
};
