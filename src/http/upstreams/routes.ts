import type { Context } from "hono";
import { logLine } from "../../domain/log.ts";
import { Refused } from "../../domain/refusal.ts";
import { MAX_UPSTREAM_TOKEN_BYTES, upstreamRefused } from "../../domain/upstream-logout.ts";
import { readUpstreams, type Upstream } from "../../domain/upstreams.ts";
import { backchannelLogout, revokeGlobally } from "../../services/upstream-logout.ts";
import type { AppEnv } from "../app-env.ts";
import { boundedText, mediaTypeOf } from "../bounded-body.ts";
import { Hono } from "../hono.ts";
import { type ScopedEnv, withScope } from "../middleware/scope.ts";
import { notFound } from "../refusals.ts";

// An upstream's OpenID Connect doors, one URL per upstream (its name in SSF_UPSTREAMS), so that
// a token of one upstream is refused at another's: back-channel logout and global token
// revocation (src/services/upstream-logout.ts). An upstream without `client_id` has neither
// (404). Every use is one `upstream_call` log line: the upstream, the door, the answer's
// status, the sessions ended or the refusal's code; never a token or a subject.

type Door = "backchannel_logout" | "global_revocation";

/** The upstream this URL is for, with OpenID Connect configured; else the path does not exist. */
function upstreamOf<E extends AppEnv>(c: Context<E>): Upstream {
  const upstream = readUpstreams(c.env).find((candidate) => candidate.name === c.req.param("name"));
  if (!upstream || upstream.clientId === null) throw notFound();
  return upstream;
}

const refuse = (description: string) => upstreamRefused("invalid_request", description);

/** The body within the bound, or a refusal. */
async function bodyOf(c: Context<ScopedEnv>): Promise<string> {
  const body = await boundedText(c.req.raw, MAX_UPSTREAM_TOKEN_BYTES);
  if (body === null) throw refuse(`The body is longer than ${MAX_UPSTREAM_TOKEN_BYTES} bytes.`);
  return body;
}

/**
 * Runs a door's work and writes its line: the answer's status and the sessions ended, or what
 * stopped it, a refusal's status and code or a failure's class. Either is thrown on, for
 * onError to answer (a failure: 503 to retry, or 500 with its own line).
 */
async function answer(
  c: Context<ScopedEnv>,
  door: Door,
  work: (upstream: Upstream) => Promise<{ status: 200 | 204; ended: number }>,
): Promise<Response> {
  const upstream = upstreamOf(c);
  const line = { upstream: upstream.name, door };
  let done: { status: 200 | 204; ended: number };
  try {
    done = await work(upstream);
  } catch (error) {
    const stopped =
      error instanceof Refused
        ? { status: error.status, error: error.body.error }
        : { status: null, error: error instanceof Error ? error.name : "error" };
    logLine("info", "upstream_call", { ...line, ...stopped });
    throw error;
  }
  logLine("info", "upstream_call", { ...line, status: done.status, ended: done.ended });
  return c.body(null, done.status);
}

export const upstreamRoutes = new Hono<AppEnv>()
  // OpenID Connect Back-Channel Logout 1.0 §2.5 and §2.8: a form with one logout_token; 200 once done.
  .post("/:name/backchannel-logout", withScope, (c) =>
    answer(c, "backchannel_logout", async (upstream) => {
      if (mediaTypeOf(c) !== "application/x-www-form-urlencoded")
        throw refuse("The Content-Type is not application/x-www-form-urlencoded.");
      const tokens = new URLSearchParams(await bodyOf(c)).getAll("logout_token");
      if (tokens.length !== 1 || tokens[0] === "") throw refuse("The body has not exactly one logout_token.");
      const ended = await backchannelLogout(c.var.scope, upstream, tokens[0] as string);
      return { status: 200, ended };
    }),
  )
  // Global token revocation (draft -06): a JSON body with sub_id, authenticated by the upstream's JWT; 204 once done.
  .post("/:name/global-token-revocation", withScope, (c) =>
    answer(c, "global_revocation", async (upstream) => {
      const [scheme, jwt, ...rest] = (c.req.header("Authorization") ?? "").split(" ");
      if (scheme?.toLowerCase() !== "bearer" || !jwt || rest.length > 0)
        throw upstreamRefused("invalid_token", "The request has no Authorization: Bearer JWT.");
      if (mediaTypeOf(c) !== "application/json") throw refuse("The Content-Type is not application/json.");
      const text = await bodyOf(c);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      const { origin, pathname } = new URL(c.req.url);
      const ended = await revokeGlobally(c.var.scope, upstream, jwt, body, `${origin}${pathname}`);
      if (ended === null) throw upstreamRefused("user_not_found", "No sign-in linked this subject to a user.");
      return { status: 204, ended };
    }),
  );
