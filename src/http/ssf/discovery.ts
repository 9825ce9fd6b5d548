import type { Context } from "hono";
import { publishedKeys } from "../../domain/signing-keys.ts";
import { DELIVERY_URNS } from "../../domain/ssf/streams.ts";
import {
  CONFIGURATION_PATH,
  DISCOVERY_MAX_AGE_SECONDS,
  JWKS_PATH,
  readTransmitter,
  type Transmitter,
  transmitterMetadata,
} from "../../domain/ssf/transmitter.ts";
import type { AppEnv } from "../app-env.ts";
import { error, json, PUBLIC_CACHE, ref } from "../openapi-parts.ts";
import { notFound } from "../refusals.ts";
import { declare, PUBLIC } from "../route.ts";

// Shared Signals (SSF 1.0) discovery: public documents, cacheable like /openapi.json.

/** The configured transmitter; without SSF_ISSUER its paths do not exist (404). */
function transmitterOf(c: Context<AppEnv>): Transmitter {
  const transmitter = readTransmitter(c.env);
  if (!transmitter) throw notFound();
  c.header("Cache-Control", `public, max-age=${DISCOVERY_MAX_AGE_SECONDS}`);
  return transmitter;
}

const OFF = { "404": error("No transmitter is configured (SSF_ISSUER is empty).", ["not_found"], {}, false) };

export const DISCOVERY_ROUTES = [
  declare({
    method: "get",
    path: CONFIGURATION_PATH,
    credential: PUBLIC,
    operationId: "getSsfConfiguration",
    summary: "Shared Signals transmitter configuration metadata (OpenID SSF 1.0)",
    answers: {
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
      ...OFF,
    },
    handler: (c) => c.json(transmitterMetadata(transmitterOf(c))),
  }),
  declare({
    method: "get",
    path: JWKS_PATH,
    credential: PUBLIC,
    operationId: "getSsfJwks",
    summary: "The public keys of the transmitter's signed SETs (RFC 7517 key set)",
    answers: {
      "200": {
        description:
          "The signing key and each key rotated out within its overlap; `kid` names the key a SET's header names.",
        headers: PUBLIC_CACHE,
        content: { "application/jwk-set+json": { schema: ref("schemas/JwkSet") } },
      },
      ...OFF,
    },
    handler: (c) => {
      const transmitter = transmitterOf(c);
      return c.json({ keys: publishedKeys(transmitter, Math.floor(Date.now() / 1000)) }, 200, {
        "Content-Type": "application/jwk-set+json",
      });
    },
  }),
] as const;
