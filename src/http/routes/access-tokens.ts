import { createMiddleware } from "hono/factory";
import {
  ACCESS_TOKEN_JWKS_PATH,
  type AccessTokenIssuer,
  JWKS_MAX_AGE_SECONDS,
  MAX_ACCESS_TOKEN_TTL_SECONDS,
  readAccessTokenIssuer,
  readAccessTokenKeys,
} from "../../domain/access-token.ts";
import { isRefusal } from "../../domain/refusal.ts";
import { publishedKeys } from "../../domain/signing-keys.ts";
import { mintAccessToken } from "../../services/access-tokens.ts";
import type { AppEnv } from "../app-env.ts";
import { requireToken, type TokenEnv } from "../middleware/auth.ts";
import { error, ok, ref } from "../openapi-parts.ts";
import { notFound, refused } from "../refusals.ts";
import { type Credential, declare, PUBLIC, TOKEN } from "../route.ts";

// Access tokens (src/domain/access-token.ts): POST /auth/token mints one from the caller's
// session, the key set verifies it. Without ACCESS_TOKEN_KEYS both answer 404, whatever the
// request carries: the feature is not there.

type IssuerEnv = AppEnv & { Variables: { issuer: AccessTokenIssuer } };

/**
 * Before the credential, the configured issuer: an unconfigured service has no such route, for
 * anyone; a refused configuration is a ConfigError (500, with its log line) on each call.
 */
const requireIssuer = createMiddleware<IssuerEnv>(async (c, next) => {
  const issuer = readAccessTokenIssuer(c.env);
  if (!issuer) throw notFound();
  c.set("issuer", issuer);
  await next();
});

const OFF = "Access tokens are off: ACCESS_TOKEN_KEYS is not set. Answered whatever the request carries.";

/** The issuer, then the caller's session token. */
const ISSUER_AND_TOKEN: Credential<TokenEnv & IssuerEnv> = {
  ...TOKEN,
  use: [requireIssuer, requireToken],
  answers: { ...TOKEN.answers, "404": error(OFF, ["not_found"]) },
};

export const ACCESS_TOKEN_ROUTES = [
  // The RFC 6749 §5.1 answer: POST, since each call mints a new token (its own `jti`), and never cached.
  declare({
    method: "post",
    path: "/auth/token",
    credential: ISSUER_AND_TOKEN,
    operationId: "mintAccessToken",
    summary: "A short-lived signed access token (RFC 9068 JWT) for the caller's session",
    description:
      "For services that verify a caller on their own against the key set: `typ` `at+jwt`, ES256 (or RS256) by the key `kid` names; claims `iss`, `sub` (the user), `aud`, `exp`, `iat`, `jti`, `sid` (the session), `auth_time`, and `amr`, `acr` (`aal1`-`aal3`) and `act` (support access: the agent) when they apply. It cannot be revoked: a verifier learns a session ended from the Shared Signals `session-revoked` event whose `sub_id.session.id` is the token's `sid`. No body is read.",
    answers: { "200": ok("The token, as an OAuth 2.0 token response (RFC 6749 §5.1).", ref("schemas/AccessToken")) },
    handler: async (c) => {
      const minted = await mintAccessToken(c.var.scope, c.var.token, c.var.issuer);
      if (isRefusal(minted)) throw refused(c, minted);
      return c.json({ access_token: minted.token, token_type: "Bearer", expires_in: minted.expiresIn });
    },
  }),
  declare({
    method: "get",
    path: ACCESS_TOKEN_JWKS_PATH,
    credential: PUBLIC,
    operationId: "getAccessTokenJwks",
    summary: "The public keys that verify access tokens (RFC 7517 key set)",
    answers: {
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
    },
    handler: (c) => {
      const keySet = readAccessTokenKeys(c.env);
      if (!keySet) throw notFound();
      return c.json({ keys: publishedKeys(keySet, Math.floor(Date.now() / 1000)) }, 200, {
        "Content-Type": "application/jwk-set+json",
        "Cache-Control": `public, max-age=${JWKS_MAX_AGE_SECONDS}`,
      });
    },
  }),
] as const;

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
