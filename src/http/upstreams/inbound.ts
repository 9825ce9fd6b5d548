import { createMiddleware } from "hono/factory";
import { readUpstreams } from "../../domain/upstreams/config.ts";
import {
  INBOUND_PATH,
  MAX_SET_BYTES,
  SET_ERROR_CODES,
  SET_MEDIA_TYPE,
  setRefused,
} from "../../domain/upstreams/inbound.ts";
import { actOnInboundSet } from "../../services/upstreams/inbound.ts";
import { upstreamNamed } from "../../services/upstreams/named.ts";
import { limitedText, mediaTypeOf } from "../limited-body.ts";
import { type ScopedEnv, withScope } from "../middleware/scope.ts";
import { error, json, ref } from "../openapi-parts.ts";
import { notFound } from "../refusals.ts";
import { type Credential, declare, type Member, PUBLIC } from "../route.ts";

// The push endpoint of inbound SETs (RFC 8935): upstreams POST their Security Event Tokens
// here, one endpoint for all of SSF_UPSTREAMS (the SET's `iss` says whose), and one per
// upstream by its name, an organization's provider's (`iss` must then be its issuer).
// Its refusals are RFC 8935's, not the API's `{code, message}`: each a `setRefused`, answered by
// the app's onError as any refusal.

/** Without an upstream that sends SETs the endpoint does not exist. */
const requireSetUpstream = createMiddleware<ScopedEnv>(async (c, next) => {
  if (!readUpstreams(c.env).some((upstream) => upstream.sets !== null)) throw notFound();
  await next();
});

/** No credential (the SET is signed), but the user's database: a scope. */
const SIGNED_SET: Credential<ScopedEnv> = { ...PUBLIC, use: [withScope, requireSetUpstream] };

const SET_BODY: Member<string, ScopedEnv> = {
  doc: {
    required: true,
    content: {
      [SET_MEDIA_TYPE]: {
        schema: { type: "string", maxLength: MAX_SET_BYTES, description: "The SET as a compact JWS." },
      },
    },
  },
  read: async (c) => {
    if (mediaTypeOf(c) !== SET_MEDIA_TYPE)
      throw setRefused("invalid_request", `The Content-Type is not ${SET_MEDIA_TYPE}.`);
    const body = await limitedText(c.req.raw, MAX_SET_BYTES);
    if (body === null) throw setRefused("invalid_request", `The body is longer than ${MAX_SET_BYTES} bytes.`);
    return body.trim();
  },
};

const SET_ANSWERS = {
  "202": {
    description:
      "Accepted: acted on, or an event this receiver ignores, a subject no sign-in linked, or a `jti` received before (answered as the first time, acted on once). No body.",
  },
  "400": {
    description:
      "Refused (RFC 8935 §2.3); nothing is acted on. `invalid_request`: not `application/secevent+jwt`, longer than its size limit, not a SET, a wrong `typ`, `iat`, `nbf`, `jti`, events or subject; `invalid_issuer`: `iss` is no upstream; `invalid_key`: `kid` names no key of the issuer, or one that cannot verify the algorithm; `authentication_failed`: the signature does not verify; `invalid_audience`: `aud` does not name this receiver; `access_denied`: an `iss_sub` subject of another issuer.",
    headers: { "Content-Language": { required: true, schema: { const: "en" } } },
    content: json({
      type: "object",
      required: ["err", "description"],
      properties: { err: { enum: [...SET_ERROR_CODES] }, description: { type: "string" } },
      additionalProperties: false,
    }),
  },
  "503": error(
    "The issuer's keys or the user's database are unavailable, a `kid` the key set fetched within the minute lacks, or their sessions are being moved; nothing was acted on. The transmitter resends after `Retry-After`.",
    ["service_unavailable", "moving"],
    { "Retry-After": ref("headers/RetryAfter") },
    false,
  ),
};

export const INBOUND_ROUTES = [
  declare({
    method: "post",
    path: INBOUND_PATH,
    credential: SIGNED_SET,
    operationId: "receiveSecurityEvent",
    summary: "Shared Signals receiver: an upstream transmitter pushes a Security Event Token (RFC 8935)",
    description:
      "The SET's `iss` must be an upstream of SSF_UPSTREAMS; it is verified (ES256 or RS256, `typ` `secevent+jwt`, `aud`, `iat` within the past 24 hours, 60 s of skew) and acted on once per `jti`. CAEP 1.0's events end the user's sessions, hold those signed in through the upstream until the user signs in again there (RFC 9470 challenge; `reauthenticate` with the provider's sign-in after the event lifts it), are logged or ignored, as the upstream's `events` says; a complex subject's `session` (this service's id or the upstream's `sid`) narrows it to that session. RISC `account-disabled`, `account-purged`, `credential-compromise` and `sessions-revoked` end every session of the user. The subject is the upstream's own, the user its sign-in linked it to (this service's user id with `subjects_are_user_ids`). Logged `ended_by_upstream`, `held_by_upstream` or `signaled_by_upstream`, reason `<upstream name>:<event>`. Two D1 round trips (the link's, then the user's); one with `subjects_are_user_ids`.",
    body: SET_BODY,
    answers: {
      ...SET_ANSWERS,
      "404": error("No upstream is configured (SSF_UPSTREAMS is empty).", ["not_found"], {}, false),
    },
    handler: async (c, { body }) => {
      await actOnInboundSet(c.var.scope, readUpstreams(c.env), body);
      // Accepted, acted on or not (an event it ignores, a SET received before): RFC 8935 §2.2.
      return c.body(null, 202);
    },
  }),
  // An organization's provider has its own URL: two organizations may trust one issuer (two
  // customers of one Google Workspace), which `iss` alone would not tell apart.
  declare({
    method: "post",
    path: `${INBOUND_PATH}/:name`,
    credential: { ...PUBLIC, use: [withScope] },
    operationId: "receiveProviderSecurityEvent",
    summary: "Shared Signals receiver of one upstream, by its name: an organization's provider pushes a SET",
    description:
      "As `POST /ssf/inbound`, for the one upstream the path names (an organization's provider, or an entry of SSF_UPSTREAMS): the SET's `iss` must be its issuer. An organization's provider acts on that organization's sessions alone. For a provider the isolate does not keep, one D1 round trip more before the others (its read).",
    parameters: {
      upstream: {
        doc: {
          name: "name",
          in: "path",
          required: true,
          schema: { type: "string" },
          description: "The upstream's name.",
        },
        read: async (c) => {
          const upstream = await upstreamNamed(c.var.scope, c.req.param("name"));
          if (!upstream || upstream.sets === null) throw notFound();
          return upstream;
        },
      },
    },
    body: SET_BODY,
    answers: {
      ...SET_ANSWERS,
      "404": error("No upstream of that name sends SETs.", ["not_found"], {}, false),
    },
    handler: async (c, { upstream, body }) => {
      await actOnInboundSet(c.var.scope, [upstream], body);
      return c.body(null, 202);
    },
  }),
] as const;
