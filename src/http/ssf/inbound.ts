import type { Context } from "hono";
import { MAX_SET_BYTES, SET_MEDIA_TYPE, setRefused } from "../../domain/ssf/inbound.ts";
import { readUpstreams } from "../../domain/upstreams.ts";
import { actOnInboundSet } from "../../services/ssf/inbound.ts";
import type { AppEnv } from "../app-env.ts";
import { boundedText, mediaTypeOf } from "../bounded-body.ts";
import { Hono } from "../hono.ts";
import { type ScopedEnv, withScope } from "../middleware/scope.ts";
import { notFound } from "../refusals.ts";

// The push endpoint of inbound SETs (RFC 8935): upstreams POST their Security Event Tokens
// here, one endpoint for all of them (the SET's `iss` says whose).
// Its refusals are RFC 8935's, not the API's `{code, message}`: each a `setRefused`, answered by
// the app's onError as any refusal.

async function actOn<E extends ScopedEnv>(c: Context<E>): Promise<void> {
  if (mediaTypeOf(c) !== SET_MEDIA_TYPE)
    throw setRefused("invalid_request", `The Content-Type is not ${SET_MEDIA_TYPE}.`);
  const body = await boundedText(c.req.raw, MAX_SET_BYTES);
  if (body === null) throw setRefused("invalid_request", `The body is longer than ${MAX_SET_BYTES} bytes.`);
  await actOnInboundSet(c.var.scope, readUpstreams(c.env), body.trim());
}

export const inboundRoutes = new Hono<AppEnv>().post("/", withScope, async (c) => {
  // Without an upstream that sends SETs the endpoint does not exist.
  if (!readUpstreams(c.env).some((upstream) => upstream.sets !== null)) throw notFound();
  await actOn(c);
  // Accepted, acted on or not (an event it ignores, a SET received before): RFC 8935 §2.2.
  return c.body(null, 202);
});
