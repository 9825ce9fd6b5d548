import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { type ClientContext, checkContextInput } from "../../domain/client-context.ts";
import { InvalidInput } from "../../domain/invalid-input.ts";
import { type CallRefusal, isCallRefusal } from "../../domain/refusal.ts";
import type { SessionData } from "../../domain/session-data.ts";
import type { CreateSessionInput, OpenSupportInput } from "../../services/issue-session.ts";
import {
  createSession,
  type ReauthenticateRequest,
  reauthenticated,
  supportSession,
} from "../../services/login-response.ts";
import { asAdminKey, type Scope } from "../../services/scope.ts";
import { updateSessionData } from "../../services/session-data.ts";
import {
  type EndSessionInput,
  type EndSupportSessionsInput,
  type EndUserSessionsInput,
  endSession,
  endSupportSessions,
  endUserSessions,
  listUserSessions,
} from "../../services/user-sessions.ts";
import { mediaTypeOf } from "../bounded-body.ts";
import { Hono } from "../hono.ts";
import { bodyTooLarge, callRefused, invalidInput, sessionNotFound, unsupportedMediaType } from "../refusals.ts";
import { type AdminEnv, requireAdminKey } from "./auth.ts";

// The admin API: the SessionService RPC's verbs over HTTP, for a login flow or a support tool
// on any stack holding an admin key (./auth.ts). Each route reads a JSON object, calls the same
// service function the RPC method calls, with the same input rules, and answers what the RPC
// answers: one D1 round trip, as the RPC. A rule the input breaks (InvalidInput, the RPC's
// TypeError or RangeError) is answered 400 `invalid_input` with its sentence as `detail`.

/** A JSON body is one of these calls' inputs: a few short strings and factors. */
export const MAX_ADMIN_BODY_BYTES = 16 * 1024;

const limitBody = bodyLimit({
  maxSize: MAX_ADMIN_BODY_BYTES,
  onError: () => {
    throw bodyTooLarge();
  },
});

/**
 * The body: a JSON object of no members but `allowed` (a typo must not pass for an omission),
 * typed as the call's input. Each member is checked by the service, as the RPC's are: over
 * RPC too the input is only what the caller sent. Sent as `application/json` (any parameter;
 * read as UTF-8, RFC 8259 §8.1), the one media type the document lists: a body sent as a form,
 * as text or untyped is refused (415), not guessed at.
 */
async function body<T>(c: Context<AdminEnv>, allowed: readonly (keyof T & string)[] | null): Promise<T> {
  if (mediaTypeOf(c) !== "application/json") throw unsupportedMediaType();
  let parsed: unknown;
  try {
    parsed = JSON.parse(await c.req.text());
  } catch {
    throw invalidInput("the body must be a JSON object");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw invalidInput("the body must be a JSON object");
  // null: the body is the data itself, any members (checked by the data's own rule).
  const unknown = allowed && Object.keys(parsed).find((member) => !(allowed as readonly string[]).includes(member));
  if (allowed && unknown !== undefined)
    throw invalidInput(`${unknown} is not a member this call takes (${allowed.join(", ")})`);
  return parsed as T;
}

/**
 * A path parameter, decoded. A path that is not percent-encoded UTF-8 (`%E0%A4%A`) is refused:
 * the router would take the broken sequence as literal text, so two paths would name one user.
 */
function param(c: Context<AdminEnv>, name: string): string {
  try {
    decodeURIComponent(new URL(c.req.url).pathname);
  } catch {
    throw invalidInput("the path must be percent-encoded UTF-8 (RFC 3986)");
  }
  // Always there: the route that called names it.
  return c.req.param(name) ?? "";
}

/**
 * The call's scope, as the RPC's: no client context is judged (the login flow passes the
 * browser's own), and every event the call causes names the key as who acted.
 */
function scopeOf(c: Context<AdminEnv>, context: ClientContext | null = null): Scope {
  return asAdminKey(c.var.scope, c.var.adminKey.id, context);
}

/**
 * Runs the service call; invalid input (src/domain/invalid-input.ts) is the 400 that names the
 * rule. Anything else (a retryable 503, a bug's TypeError) is answered as on every route.
 */
async function calling<T>(call: () => Promise<T | CallRefusal>): Promise<T> {
  let result: T | CallRefusal;
  try {
    result = await call();
  } catch (error) {
    if (error instanceof InvalidInput) throw invalidInput(error.message);
    throw error;
  }
  if (isCallRefusal(result)) throw callRefused(result);
  return result;
}

const CREATE: (keyof CreateSessionInput)[] = [
  "userId",
  "ipAddress",
  "userAgent",
  "ttlSeconds",
  "country",
  "city",
  "asn",
  "region",
  "factors",
  "assuranceLevel",
  "deviceBound",
  "carrier",
  "data",
  "upstream",
];

export const adminRoutes = new Hono<AdminEnv>()
  .post("/sessions", requireAdminKey("sessions:create"), limitBody, async (c) => {
    const input = await body<CreateSessionInput>(c, CREATE);
    return c.json(await calling(() => createSession(scopeOf(c), input)), 201);
  })
  .post("/sessions/reauthenticate", requireAdminKey("sessions:create"), limitBody, async (c) => {
    const input = await body<ReauthenticateRequest>(c, [
      "token",
      "factors",
      "assuranceLevel",
      "cookie",
      "carrier",
      "context",
    ]);
    const reissued = await calling(() => reauthenticated(scopeOf(c, checkContextInput(input.context)), input));
    if (!reissued) throw sessionNotFound();
    return c.json(reissued);
  })
  .get("/users/:userId/sessions", requireAdminKey("sessions:read"), async (c) => {
    const sessions = await calling(() => listUserSessions(scopeOf(c), param(c, "userId"), c.req.query("region")));
    return c.json({ sessions });
  })
  .post("/users/:userId/sessions/end", requireAdminKey("sessions:end"), limitBody, async (c) => {
    const input = await body<EndUserSessionsInput>(c, ["reason", "exceptSessionId", "region"]);
    const userId = param(c, "userId");
    return c.json(await calling(() => endUserSessions(scopeOf(c), { ...input, userId })));
  })
  .post("/sessions/:sessionId/end", requireAdminKey("sessions:end"), limitBody, async (c) => {
    const input = await body<EndSessionInput>(c, ["reason"]);
    const sessionId = param(c, "sessionId");
    return c.json(await calling(() => endSession(scopeOf(c), { ...input, sessionId })));
  })
  // PUT replaces the data, PATCH merges an RFC 7396 patch into it, as `mode` says to the RPC.
  .put("/sessions/:sessionId/data", requireAdminKey("sessions:data"), limitBody, async (c) => {
    const data = await body<SessionData>(c, null);
    const sessionId = param(c, "sessionId");
    return c.json(await calling(() => updateSessionData(scopeOf(c), { sessionId, data, mode: "replace" })));
  })
  .patch("/sessions/:sessionId/data", requireAdminKey("sessions:data"), limitBody, async (c) => {
    const data = await body<SessionData>(c, null);
    const sessionId = param(c, "sessionId");
    return c.json(await calling(() => updateSessionData(scopeOf(c), { sessionId, data, mode: "merge" })));
  })
  .post("/support-sessions", requireAdminKey("support"), limitBody, async (c) => {
    const input = await body<OpenSupportInput>(c, ["userId", "agentId", "reason", "ttlSeconds", "region", "data"]);
    return c.json(await calling(() => supportSession(scopeOf(c), input)), 201);
  })
  .post("/agents/:agentId/support-sessions/end", requireAdminKey("support"), limitBody, async (c) => {
    const input = await body<EndSupportSessionsInput>(c, ["reason"]);
    const agentId = param(c, "agentId");
    return c.json(await calling(() => endSupportSessions(scopeOf(c), { ...input, agentId })));
  });
