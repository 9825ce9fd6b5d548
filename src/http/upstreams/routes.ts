import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { logLine } from "../../domain/log.ts";
import { Refused } from "../../domain/refusal.ts";
import type { Upstream } from "../../domain/upstreams/config.ts";
import {
  MAX_UPSTREAM_TOKEN_BYTES,
  UPSTREAM_ERRORS,
  UPSTREAMS_PATH,
  type UpstreamErrorCode,
  upstreamRefused,
} from "../../domain/upstreams/logout.ts";
import { MAX_AMR_LENGTH, MAX_AMR_VALUES, MAX_UPSTREAM_ID_LENGTH } from "../../domain/upstreams/sign-in.ts";
import { backchannelLogout, revokeGlobally } from "../../services/upstreams/logout.ts";
import { upstreamNamed } from "../../services/upstreams/named.ts";
import { bearerToken } from "../credentials.ts";
import { writeError } from "../errors.ts";
import { limitedText, mediaTypeOf } from "../limited-body.ts";
import { type ScopedEnv, withScope } from "../middleware/scope.ts";
import { ALLOW_HEADER, anyRequest, error, errorBody, type JsonObject, json, NO_STORE, ref } from "../openapi-parts.ts";
import { notFound } from "../refusals.ts";
import { type Credential, declare, type Mount } from "../route.ts";

// An upstream's OpenID Connect routes, one URL per upstream (its name in SSF_UPSTREAMS, or an
// organization's provider's, read first when not kept: src/services/organizations/acting-providers.ts), so that
// a token of one upstream is refused at another's: back-channel logout and global token
// revocation (src/services/upstreams/logout.ts). An upstream without `client_id` has neither
// (404). Every use is one `upstream_call` log line: the upstream, the route, the answer's
// status, the sessions ended or the refusal's code (a failure has its own line); never a token or a subject.

const ID = { type: "string", minLength: 1, maxLength: MAX_UPSTREAM_ID_LENGTH };

/** `create`'s `upstream` member: the identity provider the user signed in through. */
export const UPSTREAM_SIGN_IN_INPUT = {
  type: "object",
  required: ["provider", "subject"],
  properties: {
    provider: { type: "string", description: "The upstream's `name` in SSF_UPSTREAMS." },
    subject: { ...ID, description: "The ID token's `sub`." },
    sid: { ...ID, type: ["string", "null"], description: "The ID token's `sid`, when the provider gives one." },
    session_expiry: {
      type: ["integer", "null"],
      description: "The ID token's `session_expiry` (epoch seconds): the session never outlives it.",
    },
    auth_time: {
      type: ["integer", "null"],
      description: "The ID token's `auth_time` (epoch seconds): the factors' time.",
    },
    acr: {
      ...ID,
      type: ["string", "null"],
      description: "The ID token's `acr`: a level by the upstream's `acr_levels`.",
    },
    amr: {
      type: ["array", "null"],
      maxItems: MAX_AMR_VALUES,
      items: { type: "string", minLength: 1, maxLength: MAX_AMR_LENGTH },
      description: "The ID token's `amr`: its RFC 8176 values are factors.",
    },
  },
  additionalProperties: false,
  description: "The identity provider the user signed in through: its logout then ends this session.",
};

/** The stored sign-in, as whoami, `authenticate` and the admin API's list show it. */
export const UPSTREAM_SIGN_IN = {
  type: "object",
  required: ["provider", "subject", "sid"],
  properties: {
    provider: { type: "string" },
    subject: ID,
    sid: { ...ID, type: ["string", "null"] },
    session_expiry: { ...ref("schemas/Timestamp"), description: "The provider's, when it gave one." },
    bound: { enum: ["session_expiry", "session"], description: "With `session_expiry`: which one `expires_at` is." },
  },
  additionalProperties: false,
  description: "Present only on a session signed in through an upstream identity provider.",
};

// Back-Channel Logout §2.8 asks `Pragma: no-cache` beside the no-store every answer here has
// (src/http/app.ts), for the HTTP/1.0 caches a provider's request may pass; on every answer of
// these routes, refusals and failures included (not a 405 or 414, answered before the route).
const PRAGMA = { Pragma: { required: true, schema: { const: "no-cache" } } };
const withPragma = (answer: JsonObject): JsonObject => ({
  ...answer,
  headers: { ...(answer.headers as JsonObject), ...PRAGMA },
});
const noCache = createMiddleware(async (c, next) => {
  await next();
  c.res.headers.set("Pragma", "no-cache");
});

const refusalBody = (codes: UpstreamErrorCode[]) => ({
  type: "object",
  required: ["error", "error_description"],
  properties: { error: { enum: codes }, error_description: { type: "string" } },
  additionalProperties: false,
});

const refusal = (description: string, codes: UpstreamErrorCode[], headers: Record<string, unknown> = {}) => ({
  description,
  headers: { ...NO_STORE, ...PRAGMA, "Content-Language": { required: true, schema: { const: "en" } }, ...headers },
  content: json(refusalBody(codes)),
});

/** The upstream this URL is for, with OpenID Connect configured; else the path does not exist. */
const NAME = {
  doc: {
    name: "name",
    in: "path",
    required: true,
    schema: { type: "string" },
    description: "The upstream's `name` in SSF_UPSTREAMS, or an organization's provider's; it must have a `client_id`.",
  },
  read: async (c: Context<ScopedEnv>): Promise<Upstream> => {
    const upstream = await upstreamNamed(c.var.scope, c.req.param("name"));
    if (!upstream || upstream.clientId === null) throw notFound();
    return upstream;
  },
};

type UpstreamRoute = "backchannel_logout" | "global_revocation";

const refuse = (description: string) => upstreamRefused("invalid_request", description);

/**
 * The body, sent as `mediaType`, within its size limit, or a refusal: read when the route's work
 * calls it, so that its refusal is the work's, logged.
 */
const bodyAs = <T>(mediaType: string, schema: JsonObject, of: (text: string) => T) => ({
  doc: { required: true, content: { [mediaType]: { schema } } },
  read: (c: Context) => async () => {
    if (mediaTypeOf(c) !== mediaType) throw refuse(`The Content-Type is not ${mediaType}.`);
    const body = await limitedText(c.req.raw, MAX_UPSTREAM_TOKEN_BYTES);
    if (body === null) throw refuse(`The body is longer than ${MAX_UPSTREAM_TOKEN_BYTES} bytes.`);
    return of(body);
  },
});

/**
 * Runs an upstream route's work and writes its line: the answer's status and the sessions
 * ended, or a refusal's status and code (thrown on, for onError to answer), or a failure's
 * status alone: `writeError` answers it here, with the failure's one line.
 */
async function answer(
  c: Context<ScopedEnv>,
  upstream: Upstream,
  route: UpstreamRoute,
  work: () => Promise<{ status: 200 | 204; ended: number }>,
): Promise<Response> {
  const line = { upstream: upstream.name, route };
  let done: { status: 200 | 204; ended: number };
  try {
    done = await work();
  } catch (error) {
    if (!(error instanceof Refused)) {
      const failed = writeError(c, error);
      logLine("info", "upstream_call", { ...line, status: failed.status });
      return failed;
    }
    logLine("info", "upstream_call", { ...line, status: error.status, error: error.body.error });
    throw error;
  }
  logLine("info", "upstream_call", { ...line, status: done.status, ended: done.ended });
  return c.body(null, done.status);
}

/** /upstreams/: every answer no-store, a 404 or 405 too; each route opens its scope itself. */
const UPSTREAMS: Mount = { path: UPSTREAMS_PATH, use: [] };

/** No credential of ours (each route checks the upstream's own token), but the user's database: a scope. */
const UPSTREAM: Credential<ScopedEnv> = {
  security: [],
  mount: UPSTREAMS,
  use: [noCache, withScope],
  answers: {
    "404": error("No upstream of that name has a `client_id`.", ["not_found"], PRAGMA, true),
    ...anyRequest(true),
    "500": withPragma(anyRequest(true)["500"]),
    "503": error(
      "Keys or database unavailable, a `kid` the key set fetched within the minute lacks, or the user's sessions moving; nothing ended. Send it again after `Retry-After`.",
      ["service_unavailable", "moving"],
      { "Retry-After": ref("headers/RetryAfter"), ...PRAGMA },
      true,
    ),
  },
  otherMethods: {
    "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, true),
  },
};

const status = (code: UpstreamErrorCode) => String(UPSTREAM_ERRORS[code]);

export const UPSTREAM_ROUTES = [
  // OpenID Connect Back-Channel Logout 1.0 §2.5 and §2.8: a form with one logout_token; 200 once done.
  declare({
    method: "post",
    path: `${UPSTREAMS_PATH}/:name/backchannel-logout`,
    credential: UPSTREAM,
    operationId: "upstreamBackchannelLogout",
    summary:
      "OpenID Connect Back-Channel Logout 1.0: the upstream ends the sessions of one of its sessions or subjects",
    description:
      "The rules of OpenID Connect Back-Channel Logout 1.0 §2.6, checked as docs/identity-providers.md says. With a `sid`, the sessions signed in with that upstream, subject and sid end; with `sub` alone, every session of that subject; acted on once per `jti`. Three D1 round trips, the first two at once; for an organization's provider not kept by the isolate, one more before them (its read).",
    parameters: { upstream: NAME },
    body: bodyAs(
      "application/x-www-form-urlencoded",
      {
        type: "object",
        required: ["logout_token"],
        properties: { logout_token: { type: "string", maxLength: MAX_UPSTREAM_TOKEN_BYTES } },
      },
      (text) => {
        const [token, ...more] = new URLSearchParams(text).getAll("logout_token");
        if (!token || more.length > 0) throw refuse("The body has not exactly one logout_token.");
        return token;
      },
    ),
    answers: {
      "200": {
        description: "Done (a `jti` received before ends nothing). No body.",
        headers: { ...NO_STORE, ...PRAGMA },
      },
      [status("invalid_request")]: refusal("Refused (§2.8); nothing ended.", ["invalid_request"]),
    },
    handler: (c, { upstream, body }) =>
      answer(c, upstream, "backchannel_logout", async () => {
        const ended = await backchannelLogout(c.var.scope, upstream, await body());
        return { status: 200, ended };
      }),
  }),
  // Global token revocation (draft -06): a JSON body with sub_id, authenticated by the upstream's JWT; 204 once done.
  declare({
    method: "post",
    path: `${UPSTREAMS_PATH}/:name/global-token-revocation`,
    credential: UPSTREAM,
    operationId: "upstreamGlobalTokenRevocation",
    summary:
      "Global Token Revocation (draft-parecki-oauth-global-token-revocation-06): the upstream ends every session of a user",
    description:
      "draft-parecki-oauth-global-token-revocation-06, authenticated by a JWT the upstream signs (RFC 7523) as docs/identity-providers.md says. Ends every session of the user the `iss_sub` subject is linked to. Three D1 round trips, the first two at once; for an organization's provider not kept by the isolate, one more before them (its read).",
    parameters: { upstream: NAME },
    // Parsed only: revokeGlobally checks the `sub_id` once the JWT verifies.
    body: bodyAs(
      "application/json",
      {
        type: "object",
        required: ["sub_id"],
        properties: {
          sub_id: {
            type: "object",
            required: ["format", "iss", "sub"],
            properties: { format: { const: "iss_sub" }, iss: { type: "string" }, sub: ID },
          },
        },
      },
      (text): unknown => {
        try {
          return JSON.parse(text);
        } catch {
          return undefined;
        }
      },
    ),
    answers: {
      "204": {
        description: "Done (a `jti` received before ends nothing). No body.",
        headers: { ...NO_STORE, ...PRAGMA },
      },
      [status("invalid_request")]: refusal("Not a JSON `iss_sub` `sub_id`; nothing ended.", ["invalid_request"]),
      [status("invalid_token")]: refusal("No Bearer JWT of the upstream's; nothing ended.", ["invalid_token"], {
        "WWW-Authenticate": { required: true, schema: { type: "string" } },
      }),
      [status("access_denied")]: refusal("A `sub_id` of another issuer; nothing ended.", ["access_denied"]),
      "404": {
        description: "No such upstream (`not_found`), or no sign-in linked the subject (`user_not_found`).",
        headers: { ...NO_STORE, ...PRAGMA, "Content-Language": { schema: { const: "en" } } },
        content: json({ anyOf: [errorBody("not_found"), refusalBody(["user_not_found"])] }),
      },
    },
    handler: (c, { upstream, body }) =>
      answer(c, upstream, "global_revocation", async () => {
        const jwt = bearerToken(c);
        if (!jwt) throw upstreamRefused("invalid_token", "The request has no Authorization: Bearer JWT.");
        const { origin, pathname } = new URL(c.req.url);
        const ended = await revokeGlobally(c.var.scope, upstream, jwt, await body(), `${origin}${pathname}`);
        if (ended === null) throw upstreamRefused("user_not_found", "No sign-in linked this subject to a user.");
        return { status: 204, ended };
      }),
  }),
] as const;
