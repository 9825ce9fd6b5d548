import { ORGANIZATION_ID_PATTERN } from "../domain/organizations/organization.ts";
import { DISCOVERY_MAX_AGE_SECONDS } from "../domain/ssf/transmitter.ts";
import { type ErrorCode, MESSAGES } from "./error-codes.ts";
import { MAX_PATH_LENGTH } from "./middleware/input-limits.ts";

// The pieces the OpenAPI document (src/http/openapi.ts) and the routes' declarations are built
// from: its types, references, error and success responses, and the errors many operations share.
export type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json };
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

export const ref = (pointer: string) => ({ $ref: `#/components/${pointer}` });
export const json = (schema: JsonObject) => ({ "application/json": { schema } });
export const NO_STORE = { "Cache-Control": ref("headers/NoStore") };
export const CLEARS_COOKIE = { "Set-Cookie": ref("headers/ClearedCookie") };
export const CHALLENGE = { "WWW-Authenticate": ref("headers/WWWAuthenticate") };
export const PUBLIC_CACHE = {
  "Cache-Control": {
    required: true,
    description: "Public: it changes only with a deployment or a key rotation.",
    schema: { const: `public, max-age=${DISCOVERY_MAX_AGE_SECONDS}` },
  },
};

// Bodies are whole inline schemas with `const` values, not `allOf` refinements of a shared
// schema: generated clients (openapi-typescript) then type `code` as required and each
// message as its literal.
export const errorBody = (code: ErrorCode): JsonObject => ({
  type: "object",
  required: ["code", "message"],
  properties: { code: { const: code }, message: { const: MESSAGES[code] } },
  additionalProperties: false,
});

/** An error response whose `code` is one of `codes`; every /auth/ response is no-store. */
export function error(
  description: string,
  codes: readonly ErrorCode[],
  headers: JsonObject = {},
  noStore = true,
): JsonObject {
  const [only] = codes;
  return {
    description,
    headers: { ...(noStore ? NO_STORE : {}), ...headers },
    content: json(codes.length === 1 && only ? errorBody(only) : { oneOf: codes.map(errorBody) }),
  };
}

/** A session's organization, as whoami and a backend's list show it. */
export const MEMBER_OF = {
  type: ["string", "null"],
  pattern: ORGANIZATION_ID_PATTERN.source,
  description: "The organization the session was created in (docs/organizations.md), never changed; null: outside any.",
};

export function ok(description: string, schema: JsonObject, headers: JsonObject = {}): JsonObject {
  return { description, headers: { ...NO_STORE, ...headers }, content: json(schema) };
}

/** A `{message}` body with a fixed (or patterned) message. */
export const message = (value: JsonObject) => ({
  type: "object",
  required: ["message"],
  properties: { message: { type: "string", ...value } },
  additionalProperties: false,
});

export const anyRequest = (noStore: boolean) => ({
  "414": error(
    `The path is longer than ${MAX_PATH_LENGTH} characters (checked before routing).`,
    ["uri_too_long"],
    {},
    noStore,
  ),
  "500": error(
    "Unexpected failure. Clears no cookie, so a failed logout can be retried.",
    ["internal_error"],
    {},
    noStore,
  ),
});
/** Every /auth/ operation reads or writes D1, so any of them can find it unavailable. */
export const AUTH_ERRORS = {
  ...anyRequest(true),
  "503": error(
    "`service_unavailable`: the database is overloaded or did not answer (twice); a write may or may not have taken effect, and the retry's answer says which state holds now. `moving`: the user's sessions are being moved to another database, for a second or so; nothing was changed. Retry after `Retry-After` seconds. Like a 500, it clears no cookie.",
    ["service_unavailable", "moving"],
    { "Retry-After": ref("headers/RetryAfter") },
  ),
};
export const RATE_LIMITED = {
  "429": error("Too many refused tokens from this client IP; the refusal it would have been.", ["rate_limited"], {
    "Retry-After": ref("headers/RetryAfter"),
  }),
};
/** Logouts clear a cookie the request carried, refusals included (429 too). */
export const LOGOUT_RATE_LIMITED = {
  "429": error("Too many refused tokens from this client IP. Clears a carried cookie.", ["rate_limited"], {
    "Retry-After": ref("headers/RetryAfter"),
    ...CLEARS_COOKIE,
  }),
};
export const CROSS_SITE = {
  "403": error(
    "Authenticated by the cookie alone, from another site (`Sec-Fetch-Site: cross-site`, or an `Origin` that is neither this origin nor in ALLOWED_ORIGINS).",
    ["cross_site_request"],
  ),
};
/** The cross-site 403, and a support session asking for what only the user may do (src/domain/support.ts). */
export const CROSS_SITE_OR_SUPPORT = {
  "403": error(
    "`cross_site_request`: as for every cookie-authenticated write. `support_session_refused`: the token is a support session's, which cannot do this (it may end only itself); nothing changed, the cookie stays.",
    ["cross_site_request", "support_session_refused"],
  ),
};
// Inline, not a component: only the x-other-methods extensions use it, and a component
// nothing in `paths` references is an error to OpenAPI tools.
export const ALLOW_HEADER = {
  required: true,
  description: "The methods the path answers.",
  schema: { type: "string", pattern: "^[A-Z]+(, [A-Z]+)*$" },
};
export const METHOD_NOT_ALLOWED = {
  "405": error(
    "A method the path does not answer; nothing changes, whatever the credentials.",
    ["method_not_allowed"],
    {
      Allow: ALLOW_HEADER,
    },
  ),
};
export const BEARER_OR_COOKIE: Json = [{ bearer: [] }, { sessionCookie: [] }];
export const NO_TOKEN = "No Bearer token or session cookie, or one that is malformed, unknown, expired or revoked.";
export const HELD =
  "Or (reauthentication_required) the caller's session was used from another browser or OS than last seen (or network, or too far away too soon, as SESSION_CONTEXT_* say), or its identity provider's Shared Signals event held it (SSF_UPSTREAMS `events`), and is held until the user signs in again (`reauthenticate`): nothing read or changed, RFC 9470 challenge.";
