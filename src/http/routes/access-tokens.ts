import { createMiddleware } from "hono/factory";
import {
  type AccessTokenIssuer,
  JWKS_MAX_AGE_SECONDS,
  readAccessTokenIssuer,
  readAccessTokenKeys,
} from "../../domain/access-token.ts";
import { isRefusal } from "../../domain/refusal.ts";
import { publishedKeys } from "../../domain/signing-keys.ts";
import { mintAccessToken } from "../../services/access-tokens.ts";
import type { AppEnv } from "../app-env.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";
import { notFound, refused } from "../refusals.ts";

// Access tokens (src/domain/access-token.ts): POST /auth/token mints one from the caller's
// session, the key set verifies it. Without ACCESS_TOKEN_KEYS both answer 404, whatever the
// request carries: the feature is not there.

/**
 * Before the credential, the configured issuer: an unconfigured service has no such route, for
 * anyone; a refused configuration is a ConfigError (500, with its log line) on each call.
 */
const requireIssuer = createMiddleware<AppEnv & { Variables: { issuer: AccessTokenIssuer } }>(async (c, next) => {
  const issuer = readAccessTokenIssuer(c.env);
  if (!issuer) throw notFound();
  c.set("issuer", issuer);
  await next();
});

/** The RFC 6749 §5.1 answer: POST, since each call mints a new token (its own `jti`), and never cached. */
export const tokenRoutes = new Hono<AppEnv>().post("/", requireIssuer, requireToken, async (c) => {
  const minted = await mintAccessToken(c.var.scope, c.var.token, c.var.issuer);
  if (isRefusal(minted)) throw refused(c, minted);
  return c.json({ access_token: minted.token, token_type: "Bearer", expires_in: minted.expiresIn });
});

export const accessTokenJwksRoutes = new Hono<AppEnv>().get("/", (c) => {
  const keySet = readAccessTokenKeys(c.env);
  if (!keySet) throw notFound();
  return c.json({ keys: publishedKeys(keySet, Math.floor(Date.now() / 1000)) }, 200, {
    "Content-Type": "application/jwk-set+json",
    "Cache-Control": `public, max-age=${JWKS_MAX_AGE_SECONDS}`,
  });
});
