import {
  MAX_UPSTREAM_TOKEN_BYTES,
  UPSTREAM_ERRORS,
  UPSTREAMS_PATH,
  type UpstreamErrorCode,
} from "../../domain/upstream-logout.ts";
import { MAX_UPSTREAM_ID_LENGTH } from "../../domain/upstream-sign-in.ts";
import { ALLOW_HEADER, anyRequest, error, errorBody, json, NO_STORE, type PathItem, ref } from "../openapi-parts.ts";

const ID = { type: "string", minLength: 1, maxLength: MAX_UPSTREAM_ID_LENGTH };

/** `create`'s `upstream` member: the identity provider the user signed in through. */
export const UPSTREAM_SIGN_IN_INPUT = {
  type: "object",
  required: ["provider", "subject"],
  properties: {
    provider: { type: "string", description: "The upstream's `name` in SSF_UPSTREAMS." },
    subject: { ...ID, description: "The ID token's `sub`." },
    sid: { ...ID, type: ["string", "null"], description: "The ID token's `sid`, when the provider gives one." },
  },
  additionalProperties: false,
  description: "The identity provider the user signed in through: its logout then ends this session.",
};

/** The stored sign-in, as whoami, `authenticate` and the admin API's list show it. */
export const UPSTREAM_SIGN_IN = {
  type: "object",
  required: ["provider", "subject", "sid"],
  properties: { provider: { type: "string" }, subject: ID, sid: { ...ID, type: ["string", "null"] } },
  additionalProperties: false,
  description: "Present only on a session signed in through an upstream identity provider.",
};

const refusalBody = (codes: UpstreamErrorCode[]) => ({
  type: "object",
  required: ["error", "error_description"],
  properties: { error: { enum: codes }, error_description: { type: "string" } },
  additionalProperties: false,
});

const refusal = (description: string, codes: UpstreamErrorCode[], headers: Record<string, unknown> = {}) => ({
  description,
  headers: { ...NO_STORE, "Content-Language": { required: true, schema: { const: "en" } }, ...headers },
  content: json(refusalBody(codes)),
});

const NAME = {
  name: "name",
  in: "path",
  required: true,
  schema: { type: "string" },
  description: "The upstream's `name` in SSF_UPSTREAMS; it must have a `client_id`.",
};

const COMMON = {
  "404": error("No upstream of that name has a `client_id`.", ["not_found"], {}, true),
  ...anyRequest(true),
  "503": error(
    "Keys or database unavailable, or the user's sessions moving; nothing ended. Send it again.",
    ["service_unavailable", "moving"],
    { "Retry-After": ref("headers/RetryAfter") },
    true,
  ),
};

const status = (code: UpstreamErrorCode) => String(UPSTREAM_ERRORS[code]);

/** The OpenAPI document's part (src/http/openapi.ts) for routes.ts: an upstream's OpenID Connect doors. */
export const upstreamPaths = {
  [`${UPSTREAMS_PATH}/{name}/backchannel-logout`]: {
    post: {
      operationId: "upstreamBackchannelLogout",
      summary:
        "OpenID Connect Back-Channel Logout 1.0: the upstream ends the sessions of one of its sessions or subjects",
      description:
        "The rules of OpenID Connect Back-Channel Logout 1.0 §2.6, checked as docs/identity-providers.md says. With a `sid`, the sessions signed in with that upstream, subject and sid end; with `sub` alone, every session of that subject; acted on once per `jti`. Two D1 round trips.",
      security: [],
      parameters: [NAME],
      requestBody: {
        required: true,
        content: {
          "application/x-www-form-urlencoded": {
            schema: {
              type: "object",
              required: ["logout_token"],
              properties: { logout_token: { type: "string", maxLength: MAX_UPSTREAM_TOKEN_BYTES } },
            },
          },
        },
      },
      responses: {
        "200": {
          description: "Done (a `jti` received before ends nothing). No body.",
          headers: NO_STORE,
        },
        [status("invalid_request")]: refusal("Refused (§2.8); nothing ended.", ["invalid_request"]),
        ...COMMON,
      },
    },
    "x-other-methods": {
      "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, true),
    },
  },
  [`${UPSTREAMS_PATH}/{name}/global-token-revocation`]: {
    post: {
      operationId: "upstreamGlobalTokenRevocation",
      summary:
        "Global Token Revocation (draft-parecki-oauth-global-token-revocation-06): the upstream ends every session of a user",
      description:
        "draft-parecki-oauth-global-token-revocation-06, authenticated by a JWT the upstream signs (RFC 7523) as docs/identity-providers.md says. Ends every session of the user the `iss_sub` subject is linked to. Two D1 round trips.",
      security: [],
      parameters: [NAME],
      requestBody: {
        required: true,
        content: json({
          type: "object",
          required: ["sub_id"],
          properties: {
            sub_id: {
              type: "object",
              required: ["format", "iss", "sub"],
              properties: { format: { const: "iss_sub" }, iss: { type: "string" }, sub: ID },
            },
          },
        }),
      },
      responses: {
        "204": { description: "Done (a `jti` received before ends nothing). No body.", headers: NO_STORE },
        [status("invalid_request")]: refusal("Not a JSON `iss_sub` `sub_id`; nothing ended.", ["invalid_request"]),
        [status("invalid_token")]: refusal("No Bearer JWT of the upstream's; nothing ended.", ["invalid_token"], {
          "WWW-Authenticate": { required: true, schema: { type: "string" } },
        }),
        [status("access_denied")]: refusal("A `sub_id` of another issuer; nothing ended.", ["access_denied"]),
        ...COMMON,
        "404": {
          description: "No such upstream (`not_found`), or no sign-in linked the subject (`user_not_found`).",
          headers: { ...NO_STORE, "Content-Language": { schema: { const: "en" } } },
          content: json({ anyOf: [errorBody("not_found"), refusalBody(["user_not_found"])] }),
        },
      },
    },
    "x-other-methods": {
      "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, true),
    },
  },
} as const satisfies Record<string, PathItem>;
