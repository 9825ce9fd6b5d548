import { DELIVERY_URNS } from "../../domain/ssf/streams.ts";
import { CONFIGURATION_PATH, JWKS_PATH } from "../../domain/ssf/transmitter.ts";
import { ALLOW_HEADER, anyRequest, error, json, type PathItem, PUBLIC_CACHE, ref } from "../openapi-parts.ts";

/** The OpenAPI document's part (src/http/openapi.ts) for discovery.ts: the transmitter's discovery and keys. */
export const discoveryPaths = {
  [CONFIGURATION_PATH]: {
    get: {
      operationId: "getSsfConfiguration",
      summary: "Shared Signals transmitter configuration metadata (OpenID SSF 1.0)",
      security: [],
      responses: {
        "200": {
          description: "What a receiver discovers first: the issuer its SETs carry and where their keys are.",
          headers: PUBLIC_CACHE,
          content: json({
            type: "object",
            required: [
              "spec_version",
              "issuer",
              "jwks_uri",
              "delivery_methods_supported",
              "configuration_endpoint",
              "status_endpoint",
              "add_subject_endpoint",
              "remove_subject_endpoint",
              "verification_endpoint",
              "authorization_schemes",
            ],
            properties: {
              spec_version: { const: "1_0" },
              issuer: { type: "string", format: "uri" },
              jwks_uri: { type: "string", format: "uri" },
              delivery_methods_supported: { const: [DELIVERY_URNS.push, DELIVERY_URNS.poll] },
              configuration_endpoint: { type: "string", format: "uri" },
              status_endpoint: { type: "string", format: "uri" },
              add_subject_endpoint: { type: "string", format: "uri" },
              remove_subject_endpoint: { type: "string", format: "uri" },
              verification_endpoint: { type: "string", format: "uri" },
              authorization_schemes: { const: [{ spec_urn: "urn:ietf:rfc:6750" }] },
            },
            additionalProperties: false,
          }),
        },
        "404": error("No transmitter is configured (SSF_ISSUER is empty).", ["not_found"], {}, false),
        ...anyRequest(false),
      },
    },
    "x-other-methods": {
      "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
    },
  },
  [JWKS_PATH]: {
    get: {
      operationId: "getSsfJwks",
      summary: "The public keys of the transmitter's signed SETs (RFC 7517 key set)",
      security: [],
      responses: {
        "200": {
          description:
            "The signing key and each key rotated out within its overlap; `kid` names the key a SET's header names.",
          headers: PUBLIC_CACHE,
          content: { "application/jwk-set+json": { schema: ref("schemas/JwkSet") } },
        },
        "404": error("No transmitter is configured (SSF_ISSUER is empty).", ["not_found"], {}, false),
        ...anyRequest(false),
      },
    },
    "x-other-methods": {
      "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
    },
  },
} as const satisfies Record<string, PathItem>;
