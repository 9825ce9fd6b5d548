import type { Context } from "hono";
import { MAX_SET_BYTES, readUpstreams, SET_MEDIA_TYPE, SetRefused } from "../../domain/ssf/inbound.ts";
import { actOnInboundSet } from "../../services/ssf/inbound.ts";
import type { AppEnv } from "../app-env.ts";
import { Hono } from "../hono.ts";
import { type ScopedEnv, withScope } from "../middleware/scope.ts";
import { notFound, setRefusal } from "../refusals.ts";

// The push endpoint of inbound SETs (RFC 8935): upstreams POST their Security Event Tokens
// here, one endpoint for all of them (the SET's `iss` says whose).
// Its refusals are RFC 8935's, not the API's `{code, message}`: written by `setRefusal` alone.

/** The body as text, or null when it is longer than `max` bytes: read no further than the chunk past it. */
async function boundedText(request: Request, max: number): Promise<string | null> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of request.body ?? []) {
    length += chunk.byteLength;
    if (length > max) return null;
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

async function actOn<E extends ScopedEnv>(c: Context<E>): Promise<void> {
  const type = (c.req.header("Content-Type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== SET_MEDIA_TYPE) throw new SetRefused("invalid_request", `The Content-Type is not ${SET_MEDIA_TYPE}.`);
  const body = await boundedText(c.req.raw, MAX_SET_BYTES);
  if (body === null) throw new SetRefused("invalid_request", `The body is longer than ${MAX_SET_BYTES} bytes.`);
  await actOnInboundSet(c.var.scope, readUpstreams(c.env), body.trim());
}

export const inboundRoutes = new Hono<AppEnv>().post("/", withScope, async (c) => {
  // Without upstreams the endpoint does not exist.
  if (readUpstreams(c.env).length === 0) throw notFound();
  try {
    await actOn(c);
  } catch (error) {
    if (error instanceof SetRefused) return setRefusal(c, error);
    throw error;
  }
  // Accepted, acted on or not (an event it ignores, a SET received before): RFC 8935 §2.2.
  return c.body(null, 202);
});
