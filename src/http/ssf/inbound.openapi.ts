import { INBOUND_PATH, MAX_SET_BYTES, SET_ERROR_CODES, SET_MEDIA_TYPE } from "../../domain/ssf/inbound.ts";
import { ALLOW_HEADER, anyRequest, error, json, type PathItem, ref } from "../openapi-parts.ts";

/** The OpenAPI document's part (src/http/openapi.ts) for inbound.ts: the inbound SET endpoint. */
export const inboundPaths = {
  [INBOUND_PATH]: {
    post: {
      operationId: "receiveSecurityEvent",
      summary: "Shared Signals receiver: an upstream transmitter pushes a Security Event Token (RFC 8935)",
      description:
        "The SET's `iss` must be an upstream of SSF_UPSTREAMS; it is verified (ES256 or RS256, `typ` `secevent+jwt`, `aud`, `iat` within the past 24 hours, 60 s of skew) and acted on once per `jti`. CAEP `session-revoked` ends the user's sessions, or only the one its complex subject's `session` names; RISC `account-disabled`, `account-purged`, `credential-compromise` and `sessions-revoked` end every session of the user. Each ending is logged `ended_by_upstream`, reason `<upstream name>:<event>`. One D1 round trip.",
      security: [],
      requestBody: {
        required: true,
        content: {
          [SET_MEDIA_TYPE]: {
            schema: { type: "string", maxLength: MAX_SET_BYTES, description: "The SET as a compact JWS." },
          },
        },
      },
      responses: {
        "202": {
          description:
            "Accepted: acted on, or an event this receiver ignores, or a `jti` received before (answered as the first time, acted on once). No body.",
        },
        "400": {
          description:
            "Refused (RFC 8935 §2.3); nothing is acted on. `invalid_request`: not `application/secevent+jwt`, longer than the bound, not a SET, a wrong `typ`, `iat`, `jti`, events or subject; `invalid_issuer`: `iss` is no upstream; `invalid_key`: `kid` names no key of the issuer, or one that cannot verify the algorithm; `authentication_failed`: the signature does not verify; `invalid_audience`: `aud` does not name this receiver; `access_denied`: an `iss_sub` subject of another issuer.",
          headers: { "Content-Language": { required: true, schema: { const: "en" } } },
          content: json({
            type: "object",
            required: ["err", "description"],
            properties: { err: { enum: [...SET_ERROR_CODES] }, description: { type: "string" } },
            additionalProperties: false,
          }),
        },
        "404": error("No upstream is configured (SSF_UPSTREAMS is empty).", ["not_found"], {}, false),
        ...anyRequest(false),
        "503": error(
          "The user's database is unavailable, or their sessions are being moved; nothing was acted on. The transmitter resends.",
          ["service_unavailable", "moving"],
          { "Retry-After": ref("headers/RetryAfter") },
          false,
        ),
      },
    },
    "x-other-methods": {
      "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
    },
  },
} as const satisfies Record<string, PathItem>;
