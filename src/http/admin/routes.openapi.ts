import { ADMIN_SCOPES, type AdminScope } from "../../domain/admin-keys.ts";
import { MESSAGES } from "../error-codes.ts";
import { AUTH_ERRORS, error, json, METHOD_NOT_ALLOWED, type Operation, type PathItem, ref } from "../openapi-parts.ts";
import { ADMIN_ROUTES, type AdminRoute, MAX_ADMIN_BODY_BYTES } from "./routes.ts";

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

/** A route's operation (./routes.ts declares it): its scope, body and answers, and those every admin call shares. */
function operation(route: AdminRoute): Operation {
  const { scope, body, parameters } = route;
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: `Scope \`${scope}\`. One database round trip; one \`admin_call\` log line naming the key.`,
    // OpenAPI 3.1 lets a non-OAuth scheme name the roles an operation requires: the key's scope.
    security: [{ adminKey: [scope] }],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body ? { requestBody: { required: true, content: json(body) } } : {}),
    responses: { ...guarded(scope), ...INVALID, ...(body ? BODY : {}), ...route.answers },
  };
}

/** The admin API's paths, each with its routes' operations, in the order ./routes.ts declares them. */
const operations: Record<string, { [M in AdminRoute["method"]]?: Operation }> = {};
for (const route of ADMIN_ROUTES)
  operations[route.path] = { ...operations[route.path], [route.method]: operation(route) };
export const adminPaths: Record<string, PathItem> = Object.fromEntries(
  Object.entries(operations).map(([path, item]) => [path, { ...item, "x-other-methods": OTHER_METHODS }]),
);

export const adminKeyScheme = {
  type: "http",
  scheme: "bearer",
  description: `An admin key (\`ssak_<id>.<secret>\`, from \`npm run admin:keys -- create\`), for servers only: never in a browser. Scopes: ${ADMIN_SCOPES.map((scope) => `\`${scope}\``).join(", ")}.`,
};
