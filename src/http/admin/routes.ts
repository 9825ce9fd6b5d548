import type { Context } from "hono";
import { ADMIN_SCOPES, type AdminScope } from "../../domain/admin-keys.ts";
import { type ClientContext, checkContextInput } from "../../domain/client-context.ts";
import { InvalidInput } from "../../domain/invalid-input.ts";
import {
  checkOrganizationId,
  ORGANIZATION_ID_PATTERN,
  ORGANIZATION_ID_RULE,
} from "../../domain/organizations/organization.ts";
import { MAX_REASON_LENGTH } from "../../domain/reason.ts";
import { isCallRefusal } from "../../domain/refusal.ts";
import type { Sent } from "../../domain/sent.ts";
import { MAX_SESSION_DATA_BYTES, MAX_SESSION_DATA_DEPTH, type SessionData } from "../../domain/session-data.ts";
import { USER_ID_RULE } from "../../domain/user-id.ts";
import type { CreateSessionInput, OpenSupportInput } from "../../services/issue-session.ts";
import {
  createSession,
  type ReauthenticateRequest,
  reauthenticated,
  supportSession,
} from "../../services/login-response.ts";
import {
  DEFAULT_ORGANIZATION_PAGE,
  endOrganizationSessions,
  holdOrganizationSessions,
  listOrganizationSessions,
  MAX_ORGANIZATION_PAGE,
  ORGANIZATION_CHUNK,
  type OrganizationSessionsInput,
} from "../../services/organizations/sessions.ts";
import { asAdminKey, judgingInput, type Scope } from "../../services/scope.ts";
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
import { MESSAGES } from "../error-codes.ts";
import { limitedText, mediaTypeOf } from "../limited-body.ts";
import { withScope } from "../middleware/scope.ts";
import { AUTH_ERRORS, error, type JsonObject, json, METHOD_NOT_ALLOWED, ok, ref } from "../openapi-parts.ts";
import {
  bodyTooLarge,
  callRefused,
  invalidInput,
  notFound,
  sessionNotFound,
  unsupportedMediaType,
} from "../refusals.ts";
import { type Credential, declare, type Member, type Mount } from "../route.ts";
import { UPSTREAM_SIGN_IN_INPUT } from "../upstreams/routes.ts";
import { type AdminEnv, outsideOrganization, reachOrganization, requireAdminApi, requireAdminKey } from "./auth.ts";

// The admin API: the SessionService RPC's verbs over HTTP, for a login flow or a support tool
// on any stack holding an admin key (./auth.ts). Each route reads a JSON object, calls the same
// service function the RPC method calls, with the same input rules, and answers what the RPC
// answers: one D1 round trip, as the RPC. A rule the input breaks (InvalidInput, the RPC's
// TypeError or RangeError) is answered 400 `invalid_input` with its sentence as `detail`.
// Each route is declared as every route is (src/http/route.ts): its credential is an admin key
// with the scope the call needs (`adminKey`), its body the members the call takes (`members`).

/** A JSON body is one of these calls' inputs: a few short strings and factors. */
export const MAX_ADMIN_BODY_BYTES = 16 * 1024;

/**
 * The body: a JSON object of no members but `allowed` (a typo must not pass for an omission),
 * each as sent (`Sent<T>`): each member is checked by the service, as the RPC's are, since over
 * RPC too the input is only what the caller sent. At most MAX_ADMIN_BODY_BYTES (read no further),
 * sent as `application/json` (any parameter; read as UTF-8, RFC 8259 §8.1), the one media type
 * the document lists: a body sent as a form, as text or untyped is refused (415), not guessed at.
 */
async function body(c: Context<AdminEnv>, allowed: readonly string[] | null): Promise<Record<string, unknown>> {
  const text = await limitedText(c.req.raw, MAX_ADMIN_BODY_BYTES);
  if (text === null) throw bodyTooLarge();
  if (mediaTypeOf(c) !== "application/json") throw unsupportedMediaType();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidInput("the body must be a JSON object");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw invalidInput("the body must be a JSON object");
  // null: the body is the data itself, any members (checked by the data's own rule).
  const unknown = allowed && Object.keys(parsed).find((member) => !allowed.includes(member));
  if (allowed && unknown !== undefined)
    throw invalidInput(`${unknown} is not a member this call takes (${allowed.join(", ")})`);
  return { ...parsed };
}

/** The body as the document lists it (`schema`) and as `body` reads it, with its refusals. */
export const jsonBody = (
  schema: JsonObject,
  allowed: readonly string[] | null,
): Member<Record<string, unknown>, AdminEnv> => ({
  doc: { required: true, content: json(schema) },
  read: (c) => body(c, allowed),
  answers: BODY,
});

/** A body's members, each with its JSON schema: every member of the service's input, and no other. */
type Members<Input> = { readonly [K in keyof Input]-?: JsonObject };

/** A body of these members, `required` among them, each as sent: the service checks them. */
export const members = <Input>(
  required: (keyof Input & string)[],
  schemas: Members<Input>,
): Member<Sent<Input>, AdminEnv> => jsonBody(object(required, schemas), Object.keys(schemas));

/** A body that is itself the data, of any members: the data's own rule checks it. */
const data = (description: string): Member<Sent<SessionData>, AdminEnv> => jsonBody({ ...DATA, description }, null);

/**
 * A path that is not percent-encoded UTF-8 (`%E0%A4%A`) is refused: the router would take the
 * broken sequence in a parameter as literal text, so two paths would name one user (a path
 * without parameters that routed has none). Checked once the body is read: a body's refusal
 * comes first.
 */
function checkPath(c: Context<AdminEnv>): void {
  try {
    decodeURIComponent(new URL(c.req.url).pathname);
  } catch {
    throw invalidInput("the path must be percent-encoded UTF-8 (RFC 3986)");
  }
}

/**
 * The call's scope, as the RPC's: no client context is judged (the login flow passes the
 * browser's own), and every event the call causes names the key as who acted.
 */
export function scopeOf(c: Context<AdminEnv>, context: ClientContext | null = null): Scope {
  const key = c.var.adminKey;
  return asAdminKey(c.var.scope, key.id, context, key.organization ?? null);
}

/**
 * What a key limited to an organization was answered "none" for (no live session of its
 * organization had that id or token): 404 `session_not_found`, as for a session that does not
 * exist, and logged `admin_key_outside`; for any other key, `found` as it is.
 */
function inReach<T extends { ended: boolean } | { updated: boolean }>(c: Context<AdminEnv>, found: T): T {
  const none = "ended" in found ? !found.ended : !found.updated;
  if (none && c.var.adminKey.organization !== undefined) throw outsideOrganization(c, sessionNotFound());
  return found;
}

/**
 * `create`'s organization under the call's key: a key limited to one creates the session in it
 * (named or not); another named, or none (null), is outside it.
 */
function organizationOf(c: Context<AdminEnv>, named: unknown): unknown {
  const limited = c.var.adminKey.organization;
  if (limited === undefined) return named;
  if (named !== undefined && named !== limited) throw outsideOrganization(c);
  return limited;
}

/**
 * Runs the service call and answers its result with `status`; invalid input
 * (src/domain/invalid-input.ts) the call raised before it asked a database (`judgingInput`) is
 * the 400 that names the rule, a call refusal its refusal. Anything else (a retryable 503, a
 * bug's TypeError, a stored value a rule refused) is answered as on every route.
 */
export async function answer(c: Context<AdminEnv>, status: 200 | 201 | 204, call: () => Promise<unknown>) {
  checkPath(c);
  let result: unknown;
  try {
    result = await judgingInput(c.var.scope, call);
  } catch (error) {
    if (error instanceof InvalidInput) throw invalidInput(error.message);
    throw error;
  }
  if (isCallRefusal(result)) throw callRefused(result);
  return status === 204 ? c.body(null, 204) : c.json(result, status);
}

/** The admin API: without ADMIN_KEYS every path under /admin/ is 404, before anything else. */
const ADMIN: Mount = { path: "/admin", use: [requireAdminApi, withScope] };

/** An admin key with `scope`: what every admin call answers; `roundTrips`, the call's, as the document says them. */
export function adminKey(scope: AdminScope, roundTrips = "One database round trip"): Credential<AdminEnv> {
  return {
    // OpenAPI 3.1 lets a non-OAuth scheme name the roles an operation requires: the key's scope.
    security: [{ adminKey: [scope] }],
    description: `Scope \`${scope}\`. ${roundTrips}; one \`admin_call\` log line naming the key.`,
    mount: ADMIN,
    use: [requireAdminKey(scope)],
    answers: { ...guarded(scope), ...INVALID },
    otherMethods: OTHER_METHODS,
  };
}

/** An admin key with `scope`, for a call that asks every database: one round trip to each. */
function adminKeyOnEveryDatabase(scope: AdminScope): Credential<AdminEnv> {
  return {
    ...adminKey(scope),
    description: `Scope \`${scope}\`. One round trip to each database, in parallel; one \`admin_call\` log line naming the key.`,
  };
}

const ADMIN_CHALLENGE = {
  "WWW-Authenticate": {
    required: true,
    description: 'RFC 6750, realm `admin`: `error="invalid_token"` when a key was presented and refused.',
    schema: { type: "string", pattern: '^Bearer realm="admin"(, error="invalid_token")?$' },
  },
};

/** The 400 of a broken input rule: the contract's body, and the rule as the RPC's error states it. */
const INVALID = {
  "400": {
    description:
      "A user or agent id in the path or a query parameter breaks the RPC method's rule, the path is not percent-encoded UTF-8, or the body is not a JSON object, names a member this call does not take, or has a member that breaks its rule (`detail` says which, as the RPC's TypeError or RangeError would). Nothing was written.",
    headers: { "Cache-Control": ref("headers/NoStore") },
    content: json({
      type: "object",
      required: ["code", "message", "detail"],
      properties: {
        code: { const: "invalid_input" },
        message: { const: MESSAGES.invalid_input },
        detail: { type: "string" },
      },
      additionalProperties: false,
    }),
  },
};
/** The refusals of a body: too large, or not sent as the one media type the operation lists. */
const BODY = {
  "413": error(`The body is over ${MAX_ADMIN_BODY_BYTES / 1024} KiB; nothing was written.`, ["body_too_large"]),
  "415": error("The body is not sent as `application/json` (any parameters; read as UTF-8). Nothing was written.", [
    "unsupported_media_type",
  ]),
};

const OFF = "No admin key is configured (ADMIN_KEYS is unset): the admin API does not exist.";
const OTHER_METHODS = { ...METHOD_NOT_ALLOWED, "404": error(OFF, ["not_found"]) };

/** The answers every admin call shares, for a key that needs `scope`. */
function guarded(scope: AdminScope) {
  return {
    "401": error(
      "No admin key, or one that is malformed, unknown or revoked. Counted against the client's failed-authentication limit.",
      ["invalid_token"],
      ADMIN_CHALLENGE,
    ),
    "403": error(
      `The key does not have the \`${scope}\` scope (RFC 6750 \`insufficient_scope\`).`,
      ["insufficient_scope"],
      {
        "WWW-Authenticate": {
          required: true,
          schema: { const: `Bearer realm="admin", error="insufficient_scope", scope="${scope}"` },
        },
      },
    ),
    "404": error(`${OFF} Or the key is limited to an organization and the call reaches outside it (logged).`, [
      "not_found",
    ]),
    "429": error("Too many refused keys from this client IP.", ["rate_limited"], {
      "Retry-After": ref("headers/RetryAfter"),
    }),
    ...AUTH_ERRORS,
  };
}

export const pathParameter = (name: string, description: string): Member<string, AdminEnv> => ({
  doc: { name, in: "path", required: true, description, schema: { type: "string" } },
  // Always there: the route that declares it names it.
  read: (c) => c.req.param(name) ?? "",
});
const USER_ID = pathParameter("userId", `The user's id (URL-encoded): ${USER_ID_RULE}.`);
const SESSION_ID = pathParameter(
  "sessionId",
  "The session's id: any text, as over RPC (one naming no live session answers `false`).",
);
/** The organization a path names (`:id`), read only once the key may reach it: a key limited to another learns nothing of it. */
export const ORGANIZATION_ID: Member<string, AdminEnv> = {
  ...pathParameter("id", `The organization's id: ${ORGANIZATION_ID_RULE}.`),
  read: (c) => {
    const id = c.req.param("id") ?? "";
    reachOrganization(c, id);
    return id;
  },
};
const REASON = {
  type: "string",
  maxLength: MAX_REASON_LENGTH,
  description: "Why, for the security log (e.g. `password_changed`).",
};
// No members but those listed, in a request (a member the call does not take is a 400) and in an answer.
export const object = (required: readonly string[], properties: JsonObject) => ({
  type: "object",
  required,
  properties,
  additionalProperties: false,
});

const DATA = {
  type: "object",
  description: `Application data: a JSON object of at most ${MAX_SESSION_DATA_BYTES} bytes, nested at most ${MAX_SESSION_DATA_DEPTH} deep (itself the first level); answered by authenticate and whoami, never listed.`,
};
const COUNT = { type: "integer", minimum: 0 };
/** A key limited to an organization is answered 404 where another is answered "none". */
const NONE_IN_REACH = {
  "404": error(
    "The key is limited to an organization, and no live session of it has that id (logged); or no admin key is configured.",
    ["session_not_found", "not_found"],
  ),
};
const UPDATED = {
  "200": ok(
    "Whether a live session had that id (nothing is written when none had).",
    object(["updated"], { updated: { type: "boolean" } }),
  ),
  ...NONE_IN_REACH,
};

const ISSUED = {
  type: "object",
  required: ["id", "token", "expiresAt", "cookie"],
  properties: {
    id: ref("schemas/SessionId"),
    token: { type: "string" },
    expiresAt: { type: "string", format: "date-time" },
    cookie: { type: "string", description: "A ready `Set-Cookie` value for the login response." },
    newDevice: { type: "boolean" },
    secureSessionRegistration: { type: "string" },
    boundCookie: { type: "string" },
    reportToken: { type: "string", description: "Only when `newDevice`: for /auth/report." },
  },
  additionalProperties: false,
};

/** An organization that does not exist, or one the key is limited away from: the same answer. */
const NO_ORGANIZATION = {
  "404": error(
    "No organization has that id, or the key is limited to another organization (its existence is not revealed); or no admin key is configured.",
    ["not_found"],
  ),
};

/** What ending or holding an organization's sessions answers, under `changed`'s name. */
const actAnswer = (changed: "ended" | "held", what: string) => ({
  "200": ok(
    `How many this call ${what} (at most ${ORGANIZATION_CHUNK} per database), how many sit in a bucket being moved, and whether none is left: \`complete: false\`, call again.`,
    object([changed, "moving", "complete"], { [changed]: COUNT, moving: COUNT, complete: { type: "boolean" } }),
  ),
  ...NO_ORGANIZATION,
});

/** Runs an organization's call (the key reaches it: ORGANIZATION_ID): null from the service is 404, as for another's. */
function onOrganization(c: Context<AdminEnv>, id: string, call: () => Promise<unknown>) {
  return answer(c, 200, async () => {
    checkOrganizationId(id, "id");
    const answered = await call();
    if (answered === null) throw notFound();
    return answered;
  });
}

/** A query parameter that is a whole number as sent, as a number; anything else as sent, for the service's rule. */
function wholeNumber(value: string | undefined): unknown {
  return value !== undefined && /^\d{1,9}$/.test(value) ? Number(value) : value;
}

const REASON_ONLY = members<Omit<OrganizationSessionsInput, "organizationId">>(["reason"], { reason: REASON });

/** An organization's sessions, all at once (src/services/organizations/sessions.ts). */
const ORGANIZATION_ROUTES = [
  declare({
    method: "get",
    path: "/admin/organizations/:id/sessions",
    credential: adminKeyOnEveryDatabase("sessions:read"),
    operationId: "adminListOrganizationSessions",
    summary:
      "An organization's live sessions on every database, a page at a time (SessionService.listOrganizationSessions)",
    parameters: {
      id: ORGANIZATION_ID,
      limit: {
        doc: {
          name: "limit",
          in: "query",
          required: false,
          description: `Sessions per page, 1 to ${MAX_ORGANIZATION_PAGE}; ${DEFAULT_ORGANIZATION_PAGE} when omitted.`,
          schema: { type: "integer", minimum: 1, maximum: MAX_ORGANIZATION_PAGE },
        },
        read: (c) => c.req.query("limit"),
      },
      cursor: {
        doc: {
          name: "cursor",
          in: "query",
          required: false,
          description: "The previous page's `nextCursor`; omitted: the first page.",
          schema: { type: "string" },
        },
        read: (c) => c.req.query("cursor"),
      },
    },
    answers: {
      "200": ok(
        "By session id, a stable order; `nextCursor` null on the last page. One round trip to each database.",
        object(["sessions", "nextCursor"], {
          sessions: { type: "array", items: ref("schemas/OrganizationSession") },
          nextCursor: { type: ["string", "null"] },
        }),
      ),
      ...NO_ORGANIZATION,
    },
    handler: (c, { id, limit, cursor }) =>
      onOrganization(c, id, () =>
        listOrganizationSessions(scopeOf(c), { organizationId: id, limit: wholeNumber(limit), cursor }),
      ),
  }),
  declare({
    method: "post",
    path: "/admin/organizations/:id/sessions/end",
    credential: adminKeyOnEveryDatabase("sessions:end"),
    operationId: "adminEndOrganizationSessions",
    summary:
      "End an organization's sessions on every database, a bounded part a call (SessionService.endOrganizationSessions)",
    parameters: { id: ORGANIZATION_ID },
    body: REASON_ONLY,
    answers: actAnswer("ended", "ended"),
    handler: (c, { id, body }) =>
      onOrganization(c, id, () => endOrganizationSessions(scopeOf(c), { ...body, organizationId: id })),
  }),
  declare({
    method: "post",
    path: "/admin/organizations/:id/sessions/hold",
    credential: adminKeyOnEveryDatabase("sessions:end"),
    operationId: "adminHoldOrganizationSessions",
    summary:
      "Hold an organization's sessions until each user signs in again, a bounded part a call (SessionService.holdOrganizationSessions)",
    parameters: { id: ORGANIZATION_ID },
    body: REASON_ONLY,
    answers: actAnswer("held", "held"),
    handler: (c, { id, body }) =>
      onOrganization(c, id, () => holdOrganizationSessions(scopeOf(c), { ...body, organizationId: id })),
  }),
] as const;

/** Every admin route, in the document's order. */
export const ADMIN_ROUTES = [
  declare({
    method: "post",
    path: "/admin/sessions",
    credential: adminKey("sessions:create"),
    operationId: "adminCreateSession",
    summary: "Issue a session (SessionService.create)",
    // Not `organizationId`: the RPC's alone takes it, until the admin API's create names organizations.
    body: members<Omit<CreateSessionInput, "organizationId">>(["userId"], {
      userId: { type: "string" },
      ipAddress: { type: ["string", "null"] },
      userAgent: { type: ["string", "null"] },
      ttlSeconds: { type: "integer" },
      country: { type: ["string", "null"] },
      city: { type: ["string", "null"] },
      asn: { type: ["integer", "null"] },
      latitude: { type: ["string", "number", "null"] },
      longitude: { type: ["string", "number", "null"] },
      region: { type: ["string", "null"] },
      factors: { type: "array" },
      assuranceLevel: { type: ["integer", "null"] },
      deviceBound: { type: "boolean" },
      carrier: { enum: ["cookie", "bearer", "both", null] },
      data: DATA,
      upstream: { ...UPSTREAM_SIGN_IN_INPUT, type: ["object", "null"] },
      organization: {
        type: ["string", "null"],
        pattern: ORGANIZATION_ID_PATTERN.source,
        description: "The organization the user signs in to, never changed (docs/organizations.md).",
      },
    }),
    answers: { "201": ok("The session, its token and the login response's cookie.", ISSUED) },
    handler: (c, { body }) =>
      answer(c, 201, () =>
        createSession(scopeOf(c), { ...body, organization: organizationOf(c, body.organization) as string }),
      ),
  }),
  declare({
    method: "post",
    path: "/admin/sessions/reauthenticate",
    credential: adminKey("sessions:create"),
    operationId: "adminReauthenticate",
    summary: "Record a new sign-in on a session and give it a new token (SessionService.reauthenticate)",
    body: members<ReauthenticateRequest>(["token"], {
      token: { type: "string" },
      factors: { type: "array", description: "At least one, unless `upstream` gives `auth_time` or `amr`." },
      assuranceLevel: { type: ["integer", "null"] },
      cookie: { type: "string" },
      carrier: { enum: ["cookie", "bearer"] },
      context: { type: "object" },
      upstream: { ...UPSTREAM_SIGN_IN_INPUT, type: ["object", "null"] },
    }),
    answers: {
      "200": ok(
        "The same session with its new token; the old token is dead.",
        object(["sessionId", "token", "expiresAt", "cookie"], {
          sessionId: ref("schemas/SessionId"),
          token: { type: "string" },
          expiresAt: { type: "string", format: "date-time" },
          cookie: { type: "string", description: "A ready `Set-Cookie` value carrying the new token." },
        }),
      ),
      "404": error(
        "The token proves no live session (SessionService.reauthenticate answers null), or none of the key's organization; or no admin key is configured.",
        ["session_not_found", "not_found"],
      ),
    },
    handler: (c, { body }) =>
      answer(c, 200, async () => {
        const reissued = await reauthenticated(scopeOf(c, checkContextInput(body.context)), body);
        if (!reissued && c.var.adminKey.organization !== undefined) throw outsideOrganization(c, sessionNotFound());
        if (!reissued) throw sessionNotFound();
        return reissued;
      }),
  }),
  declare({
    method: "get",
    path: "/admin/users/:userId/sessions",
    credential: adminKey("sessions:read"),
    operationId: "adminListUserSessions",
    summary:
      "A user's live sessions, as the user lists them and with the upstream sign-in of each (SessionService.listUserSessions)",
    parameters: {
      userId: USER_ID,
      region: {
        doc: { name: "region", in: "query", required: false, schema: { type: "string" } },
        read: (c) => c.req.query("region"),
      },
    },
    answers: {
      "200": ok(
        "Newest first; [] for an unknown user.",
        object(["sessions"], { sessions: { type: "array", items: ref("schemas/BackendSession") } }),
      ),
    },
    handler: (c, { userId, region }) =>
      answer(c, 200, async () => ({ sessions: await listUserSessions(scopeOf(c), userId, region) })),
  }),
  declare({
    method: "post",
    path: "/admin/users/:userId/sessions/end",
    credential: adminKey("sessions:end"),
    operationId: "adminEndUserSessions",
    summary: "End a user's sessions, or all but one (SessionService.endUserSessions)",
    parameters: { userId: USER_ID },
    body: members<Omit<EndUserSessionsInput, "userId">>(["reason"], {
      reason: REASON,
      exceptSessionId: { type: ["string", "null"] },
      region: { type: ["string", "null"] },
    }),
    answers: { "200": ok("How many ended.", object(["ended"], { ended: COUNT })) },
    handler: (c, { userId, body }) => answer(c, 200, () => endUserSessions(scopeOf(c), { ...body, userId })),
  }),
  declare({
    method: "post",
    path: "/admin/sessions/:sessionId/end",
    credential: adminKey("sessions:end"),
    operationId: "adminEndSession",
    summary: "End one session (SessionService.endSession)",
    parameters: { sessionId: SESSION_ID },
    body: members<Omit<EndSessionInput, "sessionId">>(["reason"], { reason: REASON }),
    answers: {
      "200": ok("Whether a live session had that id.", object(["ended"], { ended: { type: "boolean" } })),
      ...NONE_IN_REACH,
    },
    handler: (c, { sessionId, body }) =>
      answer(c, 200, async () => inReach(c, await endSession(scopeOf(c), { ...body, sessionId }))),
  }),
  // Not the support tool's own request (ipAddress, userAgent, carrier): the RPC's alone takes those.
  declare({
    method: "post",
    path: "/admin/support-sessions",
    credential: adminKey("support"),
    operationId: "adminOpenSupportSession",
    summary: "Open support access to a user's account for an agent (SessionService.openSupportSession)",
    body: members<Pick<OpenSupportInput, "userId" | "agentId" | "reason" | "ttlSeconds" | "region" | "data">>(
      ["userId", "agentId", "reason"],
      {
        userId: { type: "string" },
        agentId: { type: "string" },
        reason: { type: "string" },
        ttlSeconds: { type: "integer" },
        region: { type: ["string", "null"] },
        data: DATA,
      },
    ),
    answers: { "201": ok("The support session and its token.", ISSUED) },
    handler: (c, { body }) => {
      // Support access is the product's agents', across the deployment: no key of one organization opens it.
      reachOrganization(c, null);
      return answer(c, 201, () => supportSession(scopeOf(c), body));
    },
  }),
  // PUT replaces the data, PATCH merges an RFC 7396 patch into it, as `mode` says to the RPC.
  declare({
    method: "put",
    path: "/admin/sessions/:sessionId/data",
    credential: adminKey("sessions:data"),
    operationId: "adminReplaceSessionData",
    summary: "Replace a session's application data (SessionService.updateSessionData, mode replace)",
    parameters: { sessionId: SESSION_ID },
    body: data("The new data, whole; `{}` clears it."),
    answers: UPDATED,
    handler: (c, { sessionId, body }) =>
      answer(c, 200, async () =>
        inReach(c, await updateSessionData(scopeOf(c), { sessionId, data: body, mode: "replace" })),
      ),
  }),
  declare({
    method: "patch",
    path: "/admin/sessions/:sessionId/data",
    credential: adminKey("sessions:data"),
    operationId: "adminMergeSessionData",
    summary:
      "Merge an RFC 7396 JSON Merge Patch into a session's application data (SessionService.updateSessionData, mode merge)",
    parameters: { sessionId: SESSION_ID },
    body: data("The patch: each member replaces its key, a null member deletes it, objects merge."),
    answers: UPDATED,
    handler: (c, { sessionId, body }) =>
      answer(c, 200, async () =>
        inReach(c, await updateSessionData(scopeOf(c), { sessionId, data: body, mode: "merge" })),
      ),
  }),
  declare({
    method: "post",
    path: "/admin/agents/:agentId/support-sessions/end",
    credential: adminKey("support"),
    operationId: "adminEndSupportSessions",
    summary: "End every open support session of an agent (SessionService.endSupportSessions)",
    parameters: { agentId: pathParameter("agentId", `The agent's user id: ${USER_ID_RULE}.`) },
    body: members<Omit<EndSupportSessionsInput, "agentId">>(["reason"], { reason: REASON }),
    answers: {
      "200": ok(
        "How many ended, and how many were in a bucket being moved (call again).",
        object(["ended", "moving"], { ended: COUNT, moving: COUNT }),
      ),
    },
    handler: (c, { agentId, body }) => {
      reachOrganization(c, null);
      return answer(c, 200, () => endSupportSessions(scopeOf(c), { ...body, agentId }));
    },
  }),
  ...ORGANIZATION_ROUTES,
] as const;

export const adminKeyScheme = {
  type: "http",
  scheme: "bearer",
  description: `An admin key (\`ssak_<id>.<secret>\`, from \`npm run admin:keys -- create\`), for servers only: never in a browser. Scopes: ${ADMIN_SCOPES.map((scope) => `\`${scope}\``).join(", ")}.`,
};
