import type { Context } from "hono";
import { publishedKeys } from "../../domain/signing-keys.ts";
import {
  DISCOVERY_MAX_AGE_SECONDS,
  readTransmitter,
  type Transmitter,
  transmitterMetadata,
} from "../../domain/ssf/transmitter.ts";
import type { AppEnv } from "../app-env.ts";
import { Hono } from "../hono.ts";
import { notFound } from "../refusals.ts";

// Shared Signals (SSF 1.0) discovery: public documents, cacheable like /openapi.json.

/** The configured transmitter; without SSF_ISSUER its paths do not exist (404). */
function transmitterOf(c: Context<AppEnv>): Transmitter {
  const transmitter = readTransmitter(c.env);
  if (!transmitter) throw notFound();
  c.header("Cache-Control", `public, max-age=${DISCOVERY_MAX_AGE_SECONDS}`);
  return transmitter;
}

export const configurationRoutes = new Hono<AppEnv>().get("/", (c) => c.json(transmitterMetadata(transmitterOf(c))));

export const jwksRoutes = new Hono<AppEnv>().get("/", (c) => {
  const transmitter = transmitterOf(c);
  return c.json({ keys: publishedKeys(transmitter, Math.floor(Date.now() / 1000)) }, 200, {
    "Content-Type": "application/jwk-set+json",
  });
});
