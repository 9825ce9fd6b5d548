import { DEVICE_TYPES } from "../domain/device.ts";
import { REFRESH_PATH } from "../domain/device-binding.ts";
import { EVENT_TYPES, EVENTS_LISTED } from "../domain/events.ts";
import { JWS_ALGORITHMS } from "../domain/jws.ts";
import { MAX_REASON_LENGTH } from "../domain/reason.ts";
import { SESSION_NAME_RULE } from "../domain/session-view.ts";
import { DELIVERY_URNS, EVENTS_SUPPORTED, MIN_VERIFICATION_INTERVAL_SECONDS } from "../domain/ssf/streams.ts";
import { MAX_SUPPORT_REASON_LENGTH } from "../domain/support.ts";
import { SESSION_ID_PATTERN, TOKEN_LENGTH } from "../domain/token.ts";
import { MAX_USER_ID_LENGTH } from "../domain/user-id.ts";
import { MAX_USER_AGENT_LENGTH } from "../services/issue-session.ts";
import { adminKeyScheme } from "./admin/routes.ts";
import { anyRequest, error, json, MEMBER_OF, type OpenApiDocument, ref } from "./openapi-parts.ts";
import { type AnyRoute, declare, PUBLIC, pathsOf } from "./route.ts";
import { accessTokenSchema } from "./routes/access-tokens.ts";
import { IDENTIFIER_PARAMETER, PROOF_PARAMETER } from "./routes/device-binding.ts";
import { SCOPE_PARAMETER } from "./routes/logout.ts";
import { reportedSignInSchema } from "./routes/report.ts";
import { SESSION_ID_PARAMETER } from "./routes/sessions.ts";
import { whoamiSchema } from "./routes/whoami.ts";
import { STREAM_ID } from "./ssf/streams.ts";
import { UPSTREAM_SIGN_IN } from "./upstreams/routes.ts";

// The OpenAPI 3.1 description of the HTTP API, served at GET /openapi.json: its paths are built
// from the declarations the router is built from (src/http/route.ts, the list in ./routes.ts);
// here they are put together with the shared components. Every response the test suite
// receives is validated against it (test/openapi.ts), so it cannot drift.

export {
  HTTP_METHODS,
  type HttpMethod,
  type JsonObject,
  type OpenApiDocument,
  type Operation,
  type PathItem,
  type Responses,
} from "./openapi-parts.ts";

/** The device a session signed in from, as the list and the report page show it. */
const DEVICE = {
  type: "object",
  required: ["browser", "os", "type"],
  properties: {
    browser: { type: ["string", "null"] },
    os: { type: ["string", "null"] },
    type: { type: "string", enum: DEVICE_TYPES },
  },
  additionalProperties: false,
} as const;

/** A listed session, as its user sees it. */
const SESSION = {
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
      description: SESSION_NAME_RULE,
    },
    ip_address: { type: "string", description: '`""` when the address was unknown or not an IP.' },
    user_agent: { type: "string", maxLength: MAX_USER_AGENT_LENGTH },
    created_at: ref("schemas/Timestamp"),
    expires_at: ref("schemas/Timestamp"),
    last_active_at: ref("schemas/Timestamp"),
    location: { type: ["string", "null"], description: "`City, CC` where the edge saw the login, when known." },
    device: ref("schemas/Device"),
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
} as const;

/** The document of these routes: their paths, and the components and extensions they refer to. */
export const documentOf = (routes: readonly AnyRoute[]): OpenApiDocument => ({
  openapi: "3.1.0",
  info: {
    title: "Session service",
    version: "0.1.0",
    description:
      "Lists a signed-in user's sessions and ends them. Errors are `{code, message}`; clients branch on `code`. Every response under /auth/ carries `Cache-Control: no-store`. A method an /auth/ path does not list answers 405 with `Allow` built from the methods it lists (see `x-other-methods`); HEAD is answered wherever GET is.",
  },
  servers: [{ url: "/", description: "The origin that serves this document." }],
  paths: pathsOf(routes),
  components: {
    securitySchemes: {
      adminKey: adminKeyScheme,
      receiver: {
        type: "http",
        scheme: "bearer",
        description:
          "A Shared Signals receiver's credential, issued by the operator (`npm run ssf:receivers -- issue`): `<id>.<secret>` like a session token, but good only for the stream management API and poll.",
      },
      bearer: {
        type: "http",
        scheme: "bearer",
        description: `\`Authorization: Bearer <id>.<secret>\` (an opaque id of 24 or 26 URL-safe characters, a dot, a secret of 43 URL-safe characters, 44 for a session of an organization: at most ${TOKEN_LENGTH} characters; scheme case-insensitive). When an Authorization header is present it alone decides: a refused Bearer token never falls back to the cookie. A token whose session was issued for the cookie only (a browser's) is refused as Bearer, as an invalid token.`,
      },
      reportToken: {
        type: "http",
        scheme: "bearer",
        description:
          "A new device's report token (`create`'s `reportToken`): `<session id>~<secret>`, only for /auth/report.",
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
      SessionId: SESSION_ID_PARAMETER,
      SecureSessionResponse: PROOF_PARAMETER,
      SecSecureSessionId: IDENTIFIER_PARAMETER,
      Scope: SCOPE_PARAMETER,
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
      Device: DEVICE,
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
      // Ids are opaque to clients; the document gives the shape of every id issued.
      SessionId: { type: "string", pattern: SESSION_ID_PATTERN.source },
      Session: SESSION,
      BackendSession: {
        ...SESSION,
        description:
          "A listed session as a backend sees it: as its user does, the upstream sign-in behind it and its organization.",
        required: [...SESSION.required, "organization"],
        properties: { ...SESSION.properties, upstream: UPSTREAM_SIGN_IN, organization: MEMBER_OF },
      },
      OrganizationSession: {
        ...SESSION,
        description:
          "A session of an organization's member, as a backend lists it (`BackendSession`), with its user; `held` only on a session held until its user signs in again.",
        required: [...SESSION.required, "organization", "user_id"],
        properties: {
          ...SESSION.properties,
          upstream: UPSTREAM_SIGN_IN,
          organization: MEMBER_OF,
          user_id: { type: "string" },
          held: { const: true },
        },
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
      Coordinates: {
        type: "object",
        required: ["latitude", "longitude"],
        properties: { latitude: { type: "number" }, longitude: { type: "number" } },
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
              "Type `ended`: why the rest of the system ended the session (e.g. `password_changed`, `account_disabled`, `admin`). Type `ended_by_upstream`: `<upstream name>:<event>`, the upstream transmitter SSF_UPSTREAMS names and its event (e.g. `okta:session-revoked`); the same for `held_by_upstream` (held until re-authenticated) and `signaled_by_upstream` (only logged), e.g. `okta:credential-change`. Type `held`: why an admin's call held every session of the organization (the caller's reason). Type `context_changed`: the policy that applied, `log` or `hold` (the session is held until re-authenticated). Type `reauthenticated`: `hold` when it lifted a hold. Events logged before the policies and a provider's event actions shared one vocabulary say `step-up` for `hold`. Type `created`: `<upstream name>:session_expiry` when the provider's `session_expiry` ends it. Null otherwise.",
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
            properties: {
              before: ref("schemas/ClientContext"),
              after: ref("schemas/ClientContext"),
              travel: {
                type: "object",
                description:
                  "Only on travel (SESSION_CONTEXT_TRAVEL): both places (degrees), the great-circle distance and the speed it needed (null: no time passed).",
                required: ["from", "to", "distance_km", "speed_kmh"],
                properties: {
                  from: ref("schemas/Coordinates"),
                  to: ref("schemas/Coordinates"),
                  distance_km: { type: "integer" },
                  speed_kmh: { type: ["integer", "null"] },
                },
                additionalProperties: false,
              },
            },
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
          admin_key_id: {
            type: "string",
            description:
              "Present only when a call to the admin API caused the event (its session issued, ended or re-authenticated there): the id of the admin key that made it, as its `admin_call` log line names it.",
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
      Whoami: whoamiSchema,
      ReportedSignIn: reportedSignInSchema,
      AccessToken: accessTokenSchema,
      JwkSet: {
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
});

/**
 * GET /openapi.json: the document `document` gives, which lists this route too. Served by the
 * worker, not as a static asset: an asset layer puts its router in front of every request,
 * /auth/* included, which under `wrangler dev` cost the operations throughput; the document
 * costs bundle size instead (both measured: BENCHMARKS.md, Reading).
 */
export function documentRoute(document: () => OpenApiDocument) {
  let served: string | undefined;
  return declare({
    method: "get",
    path: "/openapi.json",
    credential: PUBLIC,
    operationId: "getOpenApiDocument",
    summary: "This document",
    answers: {
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
    },
    handler: (c) => {
      // Public and cacheable, unlike /auth/: it changes only with a deployment.
      c.header("Cache-Control", "public, max-age=300");
      served ??= JSON.stringify(document());
      return c.body(served, 200, { "Content-Type": "application/json" });
    },
  });
}
