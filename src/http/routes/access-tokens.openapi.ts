import {
  ACCESS_TOKEN_JWKS_PATH,
  JWKS_MAX_AGE_SECONDS,
  MAX_ACCESS_TOKEN_TTL_SECONDS,
} from "../../domain/access-token.ts";
import {
  ALLOW_HEADER,
  AUTH_ERRORS,
  anyRequest,
  BEARER_OR_COOKIE,
  CHALLENGE,
  CROSS_SITE,
  error,
  HELD,
  METHOD_NOT_ALLOWED,
  NO_TOKEN,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";

const OFF = "Access tokens are off: ACCESS_TOKEN_KEYS is not set. Answered whatever the request carries.";

/** The OpenAPI document's part (src/http/openapi.ts) for access-tokens.ts: POST /auth/token and the key set. */
export const accessTokensPaths = {
  "/auth/token": {
    post: {
      operationId: "mintAccessToken",
      summary: "A short-lived signed access token (RFC 9068 JWT) for the caller's session",
      description:
        "For services that verify a caller on their own against the key set: `typ` `at+jwt`, ES256 (or RS256) by the key `kid` names; claims `iss`, `sub` (the user), `aud`, `exp`, `iat`, `jti`, `sid` (the session), `auth_time`, and `amr`, `acr` (`aal1`-`aal3`) and `act` (support access: the agent) when they apply. It cannot be revoked: a verifier learns a session ended from the Shared Signals `session-revoked` event whose `sub_id.session.id` is the token's `sid`. No body is read.",
      security: BEARER_OR_COOKIE,
      responses: {
        "200": ok("The token, as an OAuth 2.0 token response (RFC 6749 §5.1).", ref("schemas/AccessToken")),
        "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
        ...CROSS_SITE,
        "404": error(OFF, ["not_found"]),
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  [ACCESS_TOKEN_JWKS_PATH]: {
    get: {
      operationId: "getAccessTokenJwks",
      summary: "The public keys that verify access tokens (RFC 7517 key set)",
      security: [],
      responses: {
        "200": {
          description:
            "The signing key and each key rotated out within its overlap; `kid` names the key a token's header names.",
          headers: {
            "Cache-Control": {
              required: true,
              description: "Public: it changes only with a deployment or a key rotation.",
              schema: { const: `public, max-age=${JWKS_MAX_AGE_SECONDS}` },
            },
          },
          content: { "application/jwk-set+json": { schema: ref("schemas/JwkSet") } },
        },
        "404": error(OFF, ["not_found"], {}, false),
        ...anyRequest(false),
      },
    },
    "x-other-methods": {
      "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
    },
  },
} as const satisfies Record<string, PathItem>;

export const accessTokenSchema = {
  type: "object",
  required: ["access_token", "token_type", "expires_in"],
  properties: {
    access_token: { type: "string", pattern: "^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$" },
    token_type: { const: "Bearer" },
    expires_in: {
      type: "integer",
      minimum: 0,
      maximum: MAX_ACCESS_TOKEN_TTL_SECONDS,
      description: "Seconds until `exp`: ACCESS_TOKEN_TTL_SECONDS, or less when the session ends sooner.",
    },
  },
  additionalProperties: false,
} as const;
