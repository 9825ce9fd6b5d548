import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ADMIN_SCOPES, type AdminScope, newAdminKey } from "../src/domain/admin-keys.ts";
import { USER_ID_RULE } from "../src/domain/user-id.ts";
import { app } from "../src/http/app.ts";
import { HTTP_METHODS, type Operation } from "../src/http/openapi.ts";
import { openApiDocument } from "../src/http/routes.ts";
import { countingShards, flakyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  callWith,
  d1,
  d1OfUser,
  databases,
  expectError,
  expectSecurityHeaders,
  FAILURE_LIMIT,
  insideOneLimiterWindow,
  isLive,
  issue,
  newUser,
  newUserOn,
  randomIp,
  sessionIdsOf,
  tableSnapshot,
} from "./helpers.ts";
import { newOrganization } from "./organization-fixtures.ts";

// The admin API: the RPC's verbs over HTTP for a server holding an admin key.

afterEach(() => {
  vi.restoreAllMocks();
});

const ALL: AdminScope[] = [
  "sessions:create",
  "sessions:read",
  "sessions:end",
  "sessions:data",
  "support",
  "organizations",
];

/** ADMIN_KEYS with one key of `scopes`, and that key. */
async function adminKey(scopes: AdminScope[] = ALL, name = "login flow") {
  const { stored, key } = await newAdminKey(name, scopes, new Date());
  return { vars: { ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>, key, id: stored.id };
}

function admin(vars: Partial<Env>, key: string | null, method: string, path: string, body?: unknown, ip = randomIp()) {
  const headers: Record<string, string> = { "CF-Connecting-IP": ip };
  if (key !== null) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const sent = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  return callWith(vars, method, path, headers, sent);
}

interface JsonSchema {
  properties?: Record<string, unknown>;
  additionalProperties?: boolean;
}

const INVALID = (detail: string) => ({
  code: "invalid_input",
  message: "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
  detail,
});

describe("admin API: the RPC's verbs for a server holding a key", () => {
  it("issues a session: 201 with the token and the ready Set-Cookie value, and sets no cookie itself", async () => {
    const { vars, key, id } = await adminKey();
    const userId = newUser();
    const response = await admin(vars, key, "POST", "/admin/sessions", {
      userId,
      ipAddress: "203.0.113.9",
      userAgent: CHROME_MAC,
      carrier: "cookie",
      factors: ["pwd"],
    });
    expect(response.status).toBe(201);
    expect(response.headers.get("Set-Cookie")).toBeNull();
    expect(response.headers.get("Cache-Control")).toBe("no-store");
    expect(response.headers.get("Access-Control-Allow-Origin")).toBeNull();
    expectSecurityHeaders(response);
    const created = (await response.json()) as { id: string; token: string; cookie: string; newDevice: boolean };
    expect(created.cookie).toBe(
      `__Host-session=${created.token}; Max-Age=2592000; Path=/; HttpOnly; Secure; SameSite=Lax`,
    );
    expect(created.newDevice).toBe(true);
    const log = (await (
      await callWith(vars, "GET", "/auth/events", { Cookie: created.cookie.split(";")[0] as string })
    ).json()) as {
      events: unknown[];
    };
    expect(log.events).toMatchObject([{ type: "created", session_id: created.id, admin_key_id: id }]);
    // A browser's session: its cookie works, its token as Bearer does not.
    const whoami = await callWith(vars, "GET", "/auth/whoami", { Cookie: created.cookie.split(";")[0] as string });
    expect(await whoami.json()).toMatchObject({ session_id: created.id, user_id: userId, amr: ["pwd"] });
    expect((await callWith(vars, "GET", "/auth/whoami", bearer(created.token))).status).toBe(401);
  });

  it("lists a user's sessions as the RPC does, ends one, ends all but one, each with its reason and the key", async () => {
    const { vars, key, id } = await adminKey();
    const userId = newUser();
    const [a, b, c] = [await issue(userId), await issue(userId), await issue(userId)];
    const listed = await admin(vars, key, "GET", `/admin/users/${encodeURIComponent(userId)}/sessions`);
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ sessions: await exports.SessionService.listUserSessions(userId) });

    const end = (id: string) => admin(vars, key, "POST", `/admin/sessions/${id}/end`, { reason: "admin" });
    expect(await (await end(a.id)).json()).toEqual({ ended: true });
    expect(await (await end(a.id)).json()).toEqual({ ended: false });
    const everywhere = await admin(vars, key, "POST", `/admin/users/${encodeURIComponent(userId)}/sessions/end`, {
      reason: "password_changed",
      exceptSessionId: c.id,
    });
    expect(await everywhere.json()).toEqual({ ended: 1 });
    expect([await isLive(b.token), await isLive(c.token)]).toEqual([false, true]);
    // The security log names the key as who acted; what the RPC or a session did, no key.
    const events = await (await callWith(vars, "GET", "/auth/events", bearer(c.token))).json();
    expect((events as { events: unknown[] }).events.slice(0, 2)).toMatchObject([
      { type: "ended", reason: "password_changed", session_id: b.id, admin_key_id: id, actor_session_id: null },
      { type: "ended", reason: "admin", session_id: a.id, admin_key_id: id },
    ]);
    expect((events as { events: { type: string }[] }).events.find((e) => e.type === "created")).not.toHaveProperty(
      "admin_key_id",
    );
  });

  it("reauthenticates by the session's token: the same session, a new token; a dead token is 404", async () => {
    const { vars, key } = await adminKey();
    const session = await issue(newUser());
    const response = await admin(vars, key, "POST", "/admin/sessions/reauthenticate", {
      token: session.token,
      factors: ["pwd", "otp"],
    });
    expect(response.status).toBe(200);
    const reissued = (await response.json()) as { sessionId: string; token: string; cookie: string };
    expect(reissued.sessionId).toBe(session.id);
    expect([await isLive(session.token), await isLive(reissued.token)]).toEqual([false, true]);
    await expectError(
      await admin(vars, key, "POST", "/admin/sessions/reauthenticate", { token: session.token, factors: ["pwd"] }),
      404,
      "session_not_found",
    );
  });

  it("sets a session's data at create, replaces it (PUT) and merges a patch (PATCH); whoami answers it", async () => {
    const { vars, key } = await adminKey();
    const userId = newUser();
    const created = await admin(vars, key, "POST", "/admin/sessions", {
      userId,
      data: { tenant: "acme", theme: "dark" },
    });
    const { id, token } = (await created.json()) as { id: string; token: string };
    const dataOf = async () =>
      ((await (await callWith(vars, "GET", "/auth/whoami", bearer(token))).json()) as { data?: unknown }).data;
    expect(await dataOf()).toEqual({ tenant: "acme", theme: "dark" });
    const patched = await admin(vars, key, "PATCH", `/admin/sessions/${id}/data`, { theme: null, locale: "de" });
    expect(await patched.json()).toEqual({ updated: true });
    expect(await dataOf()).toEqual({ tenant: "acme", locale: "de" });
    expect(await (await admin(vars, key, "PUT", `/admin/sessions/${id}/data`, { tenant: "globex" })).json()).toEqual({
      updated: true,
    });
    expect(await dataOf()).toEqual({ tenant: "globex" });
    // Never in the user's own list.
    const listed = await (await admin(vars, key, "GET", `/admin/users/${encodeURIComponent(userId)}/sessions`)).json();
    expect(JSON.stringify(listed)).not.toContain("globex");
    // An ended session: nothing to update.
    await admin(vars, key, "POST", `/admin/sessions/${id}/end`, { reason: "admin" });
    expect(await (await admin(vars, key, "PUT", `/admin/sessions/${id}/data`, { tenant: "x" })).json()).toEqual({
      updated: false,
    });
  });

  it("opens support access and ends an agent's support sessions", async () => {
    const { vars, key } = await adminKey(["support"]);
    const userId = newUser();
    await issue(userId);
    const opened = await admin(vars, key, "POST", "/admin/support-sessions", {
      userId,
      agentId: "agent-ada",
      reason: "Ticket 7",
    });
    expect(opened.status).toBe(201);
    const { id } = (await opened.json()) as { id: string };
    const log = vi.spyOn(console, "log");
    const ended = await admin(vars, key, "POST", "/admin/agents/agent-ada/support-sessions/end", {
      reason: "offboarded",
    });
    expect(await ended.json()).toEqual({ ended: 1, moving: 0 });
    expect(await sessionIdsOf(userId)).not.toContain(id);
    // One round trip to each database, as it must: no request log line, on one database or four.
    expect(log.mock.calls.map(([line]) => JSON.parse(String(line)).event)).toEqual(["admin_call"]);
  });

  it("each call is one round trip, to the user's database; the key costs none", async () => {
    const { vars, key } = await adminKey();
    const userId = newUser();
    const own = { [await bindingOfUser(userId)]: 1 };
    // The key's first call in this isolate also records its use, after the answer (once a minute).
    await admin(vars, key, "GET", `/admin/users/${newUser()}/sessions`);
    const counted = async (method: string, path: string, body?: unknown) => {
      const counter = countingShards(databases());
      const response = await admin({ ...vars, ...counter.env }, key, method, path, body);
      return { status: response.status, roundTrips: counter.roundTrips() };
    };
    const created = await counted("POST", "/admin/sessions", { userId });
    expect(created).toEqual({ status: 201, roundTrips: own });
    const user = encodeURIComponent(userId);
    expect(await counted("GET", `/admin/users/${user}/sessions`)).toEqual({ status: 200, roundTrips: own });
    expect(await counted("POST", `/admin/users/${user}/sessions/end`, { reason: "admin" })).toEqual({
      status: 200,
      roundTrips: own,
    });
  });

  it("records a key's last use after the answer, at most once a minute per key", async () => {
    const { vars, key, id } = await adminKey(["sessions:read"]);
    const uses = () => d1("DB").prepare("SELECT last_used_at FROM admin_key_uses WHERE key_id = ?").bind(id).all();
    expect((await uses()).results).toEqual([]);
    const start = Date.now();
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(start);
    await admin(vars, key, "GET", `/admin/users/${newUser()}/sessions`);
    expect((await uses()).results).toEqual([{ last_used_at: start }]);
    vi.setSystemTime(start + 59_000);
    await admin(vars, key, "GET", `/admin/users/${newUser()}/sessions`);
    expect((await uses()).results).toEqual([{ last_used_at: start }]);
    vi.setSystemTime(start + 61_000);
    await admin(vars, key, "GET", `/admin/users/${newUser()}/sessions`);
    expect((await uses()).results).toEqual([{ last_used_at: start + 61_000 }]);
    // A refused call is no use of the key.
    const other = await adminKey(["support"]);
    await admin(other.vars, other.key, "GET", `/admin/users/${newUser()}/sessions`);
    const refused = await d1("DB").prepare("SELECT * FROM admin_key_uses WHERE key_id = ?").bind(other.id).all();
    expect(refused.results).toEqual([]);
    vi.useRealTimers();
  });

  it("writes one admin_call line per call naming the key, never the key", async () => {
    const { vars, key, id } = await adminKey(["sessions:read"], "support desk");
    const log = vi.spyOn(console, "log");
    const userId = newUser();
    await admin(vars, key, "GET", `/admin/users/${userId}/sessions`);
    await admin(vars, key, "POST", "/admin/sessions", { userId });
    const lines = log.mock.calls.map(([line]) => String(line)).filter((line) => line.includes("admin_call"));
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      {
        level: "info",
        event: "admin_call",
        key: id,
        name: "support desk",
        method: "GET",
        route: "/admin/users/:userId/sessions",
        status: 200,
      },
      {
        level: "info",
        event: "admin_call",
        key: id,
        name: "support desk",
        method: "POST",
        route: "/admin/sessions",
        status: 403,
      },
    ]);
    for (const line of lines) expect(line).not.toContain(key.split(".")[1]);
  });

  it("which calls are a key's use and get an admin_call line: none before the key is proven, a line from the scope check on, a use once allowed", async () => {
    const log = vi.spyOn(console, "log");
    const calls = () =>
      log.mock.calls
        .map(([line]) => JSON.parse(String(line)))
        .filter((line) => line.event === "admin_call")
        .map(({ route, status }) => `${status} ${route}`);
    const used = async (id: string) =>
      (await d1("DB").prepare("SELECT key_id FROM admin_key_uses WHERE key_id = ?").bind(id).all()).results.length > 0;
    const reader = await adminKey(["sessions:read"]);
    const path = `/admin/users/${newUser()}/sessions`;
    // Refused before any key is proven (401: no key, a wrong one; 405): no key to name, no use.
    expect((await admin(reader.vars, null, "GET", path)).status).toBe(401);
    expect((await admin(reader.vars, `${reader.key}x`, "GET", path)).status).toBe(401);
    expect((await admin(reader.vars, reader.key, "DELETE", path)).status).toBe(405);
    expect(calls()).toEqual([]);
    // Refused for its scope: the line names it, and it is no use of the key.
    expect((await admin(reader.vars, reader.key, "POST", "/admin/sessions", { userId: newUser() })).status).toBe(403);
    expect(calls()).toEqual(["403 /admin/sessions"]);
    expect(await used(reader.id)).toBe(false);
    // Allowed, then refused for its input (400, 415): a line, and a use of the key.
    const ender = await adminKey(["sessions:end"]);
    const end = `/admin/users/${newUser()}/sessions/end`;
    expect((await admin(ender.vars, ender.key, "POST", end, { reason: "" })).status).toBe(400);
    expect(calls()).toEqual(["403 /admin/sessions", "400 /admin/users/:userId/sessions/end"]);
    expect(await used(ender.id)).toBe(true);
    const typed = await adminKey(["sessions:end"]);
    const plain = { Authorization: `Bearer ${typed.key}`, "Content-Type": "text/plain" };
    expect((await callWith(typed.vars, "POST", end, plain, '{"reason":"admin"}')).status).toBe(415);
    expect(calls().at(-1)).toBe("415 /admin/users/:userId/sessions/end");
    expect(await used(typed.id)).toBe(true);
  });

  it("the request log counts the call's own round trips: a retried transient error is a line, the key's last use after the answer is none", async () => {
    const { vars, key } = await adminKey(["sessions:read"]);
    // On DB, where the key's last use is written: on another, a second database asked would hide it.
    const userId = await newUserOn("DB");
    const path = `/admin/users/${encodeURIComponent(userId)}/sessions`;
    const log = vi.spyOn(console, "log");
    const requestLines = () =>
      log.mock.calls.map(([line]) => JSON.parse(String(line))).filter((line) => line.event === "request");
    // The key's first call: its use is recorded after the answer, a round trip of its own.
    expect((await admin(vars, key, "GET", path)).status).toBe(200);
    expect(requestLines()).toEqual([]);
    const flaky = flakyD1(await d1OfUser(userId), 1, () => new Error("D1_ERROR: Network connection lost."));
    expect((await admin({ ...vars, [await bindingOfUser(userId)]: flaky.db }, key, "GET", path)).status).toBe(200);
    expect(requestLines()).toEqual([
      {
        level: "warn",
        event: "request",
        method: "GET",
        route: "/admin/users/:userId/sessions",
        status: 200,
        duration_ms: expect.any(Number),
        session_id: null,
        d1_round_trips: 2,
      },
    ]);
  });
});

describe("admin API: refused keys and bad input, nothing written", () => {
  it("no ADMIN_KEYS: every admin path is 404, whatever the request carries", async () => {
    const { key } = await adminKey();
    await expectError(await admin({}, key, "POST", "/admin/sessions", { userId: newUser() }), 404, "not_found");
    await expectError(await admin({}, null, "GET", "/admin/users/x/sessions"), 404, "not_found");
    await expectError(await admin({}, null, "DELETE", "/admin/sessions"), 404, "not_found");
  });

  it("a missing, malformed, unknown, wrongly signed or revoked key: 401 in realm admin", async () => {
    const { vars, key } = await adminKey();
    const other = await adminKey();
    const [id, secret] = key.slice("ssak_".length).split(".") as [string, string];
    const session = await issue(newUser());
    const before = await tableSnapshot();
    const challenge = 'Bearer realm="admin", error="invalid_token"';
    await expectError(await admin(vars, null, "POST", "/admin/sessions", { userId: "x" }), 401, "invalid_token", {
      wwwAuthenticate: 'Bearer realm="admin"',
    });
    for (const wrong of [
      "ssak_short",
      `${id}.${secret}`,
      `ssak_${id}.${"A".repeat(43)}`,
      other.key,
      `sk_live_${id}.${secret}`,
    ])
      await expectError(await admin(vars, wrong, "POST", "/admin/sessions", { userId: "x" }), 401, "invalid_token", {
        wwwAuthenticate: challenge,
      });
    // A session token is no admin key.
    await expectError(await admin(vars, session.token, "GET", "/admin/users/x/sessions"), 401, "invalid_token", {
      wwwAuthenticate: challenge,
    });
    expect(await tableSnapshot()).toEqual(before);
  });

  // The local limiter's windows follow the wall clock: up to a minute's wait for one window.
  it("refused keys count toward the failed-authentication limit", { timeout: 75_000 }, async () => {
    const { vars } = await adminKey();
    const ip = randomIp();
    await insideOneLimiterWindow(10_000);
    for (let i = 0; i < FAILURE_LIMIT; i++)
      expect((await admin(vars, "ssak_nope", "GET", "/admin/users/x/sessions", undefined, ip)).status).toBe(401);
    await expectError(
      await admin(vars, "ssak_nope", "GET", "/admin/users/x/sessions", undefined, ip),
      429,
      "rate_limited",
      {
        retryAfter: "60",
      },
    );
  });

  it("a key without the scope: 403 insufficient_scope (RFC 6750), nothing written", async () => {
    const { vars, key } = await adminKey(["sessions:read"]);
    const before = await tableSnapshot();
    const refused = await admin(vars, key, "POST", "/admin/sessions", { userId: newUser() });
    await expectError(refused, 403, "insufficient_scope", {
      wwwAuthenticate: 'Bearer realm="admin", error="insufficient_scope", scope="sessions:create"',
    });
    expect(await tableSnapshot()).toEqual(before);
  });

  it("a body that is not an object, unknown members, and inputs the RPC refuses: 400 with the rule, nothing written", async () => {
    const { vars, key } = await adminKey();
    const userId = newUser();
    const live = await issue(userId);
    const before = await tableSnapshot();
    const cases: [string, string, unknown, string][] = [
      ["POST", "/admin/sessions", "not json", "the body must be a JSON object"],
      ["POST", "/admin/sessions", [userId], "the body must be a JSON object"],
      ["POST", "/admin/sessions", { userId, admin: true }, "admin is not a member this call takes"],
      ["POST", "/admin/sessions", { userId: "" }, "userId must be"],
      ["POST", "/admin/sessions", { userId, ttlSeconds: -1 }, "ttlSeconds must be an integer"],
      ["POST", "/admin/sessions", { userId, carrier: "pigeon" }, "carrier must be one of"],
      ["POST", `/admin/users/${userId}/sessions/end`, { reason: "" }, "reason must be"],
      ["POST", `/admin/users/${userId}/sessions/end`, {}, "reason must be"],
      // The service's own reasons: a policy's, a user's report, a relink by an upstream sign-in.
      ...["context_changed", "reported_by_user", "upstream_relinked"].flatMap(
        (reason): [string, string, unknown, string][] => [
          ["POST", `/admin/users/${userId}/sessions/end`, { reason }, "is the service's own"],
          ["POST", `/admin/sessions/${live.id}/end`, { reason }, "is the service's own"],
        ],
      ),
      ["POST", `/admin/sessions/${live.id}/end`, { reason: "x", userId }, "userId is not a member"],
      ["POST", "/admin/support-sessions", { userId, agentId: userId, reason: "T" }, "agentId must not be the user"],
      ["POST", "/admin/sessions", { userId, data: [1] }, "data must be a JSON object"],
      ["PUT", `/admin/sessions/${live.id}/data`, { big: "x".repeat(2100) }, "data must be at most 2048 bytes"],
      ["PATCH", `/admin/sessions/${live.id}/data`, [], "the body must be a JSON object"],
      ["GET", `/admin/users/${encodeURIComponent(` ${userId}`)}/sessions`, undefined, "userId must be"],
      ["GET", `/admin/users/${userId}/sessions?region=mars`, undefined, "region must be one of"],
    ];
    for (const [method, path, body, detail] of cases) {
      const response = await admin(vars, key, method, path, body);
      expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      const answer = (await response.json()) as { detail: string };
      expect(answer).toEqual(INVALID(answer.detail));
      expect(answer.detail).toContain(detail);
    }
    await expectError(
      await admin(vars, key, "POST", "/admin/sessions", { userId, userAgent: "x".repeat(17 * 1024) }),
      413,
      "body_too_large",
    );
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(live.token)).toBe(true);
  });

  it("members the service takes as they come are taken so, never a failure: an ipAddress or city of another type is unknown", async () => {
    const { vars, key } = await adminKey();
    const created = await admin(vars, key, "POST", "/admin/sessions", { userId: newUser(), ipAddress: 42, city: true });
    expect(created.status).toBe(201);
    const { token } = (await created.json()) as { token: string };
    const listed = await callWith(vars, "GET", "/auth/sessions", bearer(token));
    expect((await listed.json()) as object).toMatchObject({ sessions: [{ ip_address: "", location: null }] });
  });

  it("user ids . and ..: refused at creation (a path cannot name them: URL parsing removes dot segments)", async () => {
    const { vars, key } = await adminKey();
    const before = await tableSnapshot();
    for (const userId of [".", ".."]) {
      const created = await admin(vars, key, "POST", "/admin/sessions", { userId });
      expect(created.status).toBe(400);
      expect(((await created.json()) as { detail: string }).detail).toBe(`userId must be ${USER_ID_RULE}`);
      const support = await admin(vars, key, "POST", "/admin/support-sessions", {
        userId: newUser(),
        agentId: userId,
        reason: "T-1",
      });
      expect(support.status).toBe(400);
    }
    // What these paths are, once parsed: /admin/sessions, /admin/sessions/end, /admin/users/sessions.
    await expectError(await admin(vars, key, "GET", "/admin/users/%2E%2E/sessions"), 405, "method_not_allowed", {
      allow: "POST",
    });
    const end = await admin(vars, key, "POST", "/admin/users/%2E%2E/sessions/end", { reason: "admin" });
    await expectError(end, 404, "not_found");
    await expectError(await admin(vars, key, "GET", "/admin/users/%2E/sessions"), 404, "not_found");
    expect(await tableSnapshot()).toEqual(before);
  });

  it("a path that is not percent-encoded UTF-8: 400, never taken as the literal text", async () => {
    const { vars, key } = await adminKey();
    const session = await issue(newUser());
    const before = await tableSnapshot();
    const broken = "%E0%A4%A";
    const cases: [string, string, unknown][] = [
      ["GET", `/admin/users/${broken}/sessions`, undefined],
      ["GET", "/admin/users/%FF/sessions", undefined],
      ["POST", `/admin/users/${broken}/sessions/end`, { reason: "admin" }],
      ["POST", `/admin/sessions/${session.id}${broken}/end`, { reason: "admin" }],
      ["PUT", `/admin/sessions/${broken}/data`, { a: 1 }],
      ["POST", `/admin/agents/${broken}/support-sessions/end`, { reason: "admin" }],
    ];
    for (const [method, path, body] of cases) {
      const response = await admin(vars, key, method, path, body);
      expect({ path, status: response.status, body: await response.json() }).toEqual({
        path,
        status: 400,
        body: INVALID("the path must be percent-encoded UTF-8 (RFC 3986)"),
      });
    }
    // The literal text, percent-encoded as it should be, is an id like any other.
    expect(await (await admin(vars, key, "GET", `/admin/users/${encodeURIComponent(broken)}/sessions`)).json()).toEqual(
      { sessions: [] },
    );
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });

  it("a body not sent as application/json: 415 on every route that takes one, nothing written", async () => {
    const { vars, key } = await adminKey();
    const userId = newUser();
    const session = await issue(userId);
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    const sent = (method: string, path: string, contentType: string | null, body: unknown = { userId, reason: "x" }) =>
      callWith(
        vars,
        method,
        path,
        { Authorization: `Bearer ${key}`, ...(contentType === null ? {} : { "Content-Type": contentType }) },
        // Bytes, not a string: a string body would be given text/plain by the Request itself.
        new TextEncoder().encode(JSON.stringify(body)),
      );
    const withBody = adminOperations().filter(({ operation }) => operation.requestBody !== undefined);
    expect(withBody).toHaveLength(16);
    const organizationId = await newOrganization();
    for (const { method, path } of withBody) {
      const concrete = path
        .replace("{id}", "org_0000000000000000000000")
        .replace("{userId}", encodeURIComponent(userId))
        .replace("{sessionId}", session.id)
        .replace("{agentId}", "agent-type")
        .replace("{id}", organizationId)
        .replace("{provider}", "idp");
      for (const contentType of ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", null])
        await expectError(await sent(method, concrete, contentType), 415, "unsupported_media_type");
    }
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    // The media type, in any case, with any parameter.
    const data = await sent("PUT", `/admin/sessions/${session.id}/data`, "Application/JSON", { a: 1 });
    expect(await data.json()).toEqual({ updated: true });
    const end = await sent("POST", `/admin/sessions/${session.id}/end`, "application/json; charset=utf-8", {
      reason: "admin",
    });
    expect(await end.json()).toEqual({ ended: true });
  });

  it("a session id that cannot be one, on the end and data routes: false, as over RPC; nothing written", async () => {
    const { vars, key } = await adminKey();
    const live = await issue(newUser());
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    for (const sessionId of ["not-a-session-id", "short", encodeURIComponent(live.token)]) {
      const ended = await admin(vars, key, "POST", `/admin/sessions/${sessionId}/end`, { reason: "admin" });
      expect({ status: ended.status, body: await ended.json() }).toEqual({ status: 200, body: { ended: false } });
      for (const method of ["PUT", "PATCH"]) {
        const updated = await admin(vars, key, method, `/admin/sessions/${sessionId}/data`, { a: 1 });
        expect({ status: updated.status, body: await updated.json() }).toEqual({
          status: 200,
          body: { updated: false },
        });
      }
    }
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    expect(await isLive(live.token)).toBe(true);
  });

  it("the document says what the entry point does: members a call does not take are refused, and so is data nested past 8 levels, the top one counted", async () => {
    const { vars, key } = await adminKey();
    const session = await issue(newUser());
    const before = await tableSnapshot();
    for (const { method, path, operation } of adminOperations()) {
      const body = operation.requestBody as { content: { "application/json": { schema: JsonSchema } } } | undefined;
      const schema = body?.content["application/json"].schema;
      // The data routes take any members: the data itself.
      if (!schema?.properties) continue;
      expect(schema.additionalProperties, path).toBe(false);
      const refused = await admin(vars, key, method, path.replace(/\{\w+\}/, "x"), { surplus: 1 });
      const { detail } = (await refused.json()) as { detail: string };
      expect(refused.status).toBe(400);
      // "surplus is not a member this call takes (a, b, …)": the members the document lists.
      const taken = /^surplus is not a member this call takes \((.*)\)$/.exec(detail)?.[1]?.split(", ");
      expect(taken?.sort()).toEqual(Object.keys(schema.properties).sort());
    }
    const nested = (depth: number): object => (depth === 1 ? { leaf: true } : { a: nested(depth - 1) });
    const data = `/admin/sessions/${session.id}/data`;
    const deep = await admin(vars, key, "PUT", data, nested(9));
    expect(await deep.json()).toEqual(
      INVALID("data may nest objects and arrays at most 8 deep: data.a.a.a.a.a.a.a.a is deeper"),
    );
    expect(await tableSnapshot()).toEqual(before);
    expect(await (await admin(vars, key, "PUT", data, nested(8))).json()).toEqual({ updated: true });
  });

  it("other methods on a known path: 405 with Allow; an unknown admin path: 404", async () => {
    const { vars, key } = await adminKey();
    await expectError(await admin(vars, key, "GET", "/admin/sessions"), 405, "method_not_allowed", { allow: "POST" });
    await expectError(await admin(vars, key, "GET", "/admin/nothing"), 404, "not_found");
  });
});

/** Each admin operation the document lists, with the scope its security requirement names. */
function adminOperations(): { method: string; path: string; scope: AdminScope; operation: Operation }[] {
  return Object.entries(openApiDocument.paths)
    .filter(([path]) => path.startsWith("/admin/"))
    .flatMap(([path, item]) =>
      HTTP_METHODS.flatMap((method) => {
        const operation = item[method];
        if (!operation) return [];
        const [{ adminKey }] = operation.security as [{ adminKey: [AdminScope] }];
        return [{ method: method.toUpperCase(), path, scope: adminKey[0], operation }];
      }),
    );
}

/**
 * The scope each admin route requires, stated here rather than read from the document: the
 * document is built from the same declaration as the router, so a route declared with the wrong
 * scope would agree with itself. A new route fails the first test below until it is added here.
 */
const EXPECTED_SCOPES: Record<string, AdminScope> = {
  "POST /admin/sessions": "sessions:create",
  "POST /admin/sessions/reauthenticate": "sessions:create",
  "GET /admin/users/{userId}/sessions": "sessions:read",
  "POST /admin/users/{userId}/sessions/end": "sessions:end",
  "POST /admin/sessions/{sessionId}/end": "sessions:end",
  "POST /admin/support-sessions": "support",
  "PUT /admin/sessions/{sessionId}/data": "sessions:data",
  "PATCH /admin/sessions/{sessionId}/data": "sessions:data",
  "POST /admin/agents/{agentId}/support-sessions/end": "support",
  "GET /admin/organizations/{id}/sessions": "sessions:read",
  "POST /admin/organizations/{id}/sessions/end": "sessions:end",
  "POST /admin/organizations/{id}/sessions/hold": "sessions:end",
  "POST /admin/organizations/{id}/providers": "organizations",
  "GET /admin/organizations/{id}/providers": "organizations",
  "GET /admin/organizations/{id}/providers/{provider}": "organizations",
  "PUT /admin/organizations/{id}/providers/{provider}": "organizations",
  "PATCH /admin/organizations/{id}/providers/{provider}": "organizations",
  "DELETE /admin/organizations/{id}/providers/{provider}": "organizations",
  "POST /admin/organizations": "organizations",
  "GET /admin/organizations": "organizations",
  "GET /admin/organizations/{id}": "organizations",
  "PATCH /admin/organizations/{id}": "organizations",
  "DELETE /admin/organizations/{id}": "organizations",
  "GET /admin/organizations/{id}/policy": "organizations",
  "PUT /admin/organizations/{id}/policy": "organizations",
};

/** An organization's provider's entry, of `name`. */
const providerEntry = (name: string) => ({
  name,
  issuer: "https://idp.example",
  client_id: "sessions-app",
  jwks_uri: "https://idp.example/jwks",
});

describe("admin API: each route checks its own scope", () => {
  it("the table above names every admin route the document lists, with the scope the document names", () => {
    const documented = Object.fromEntries(
      adminOperations().map(({ method, path, scope }) => [`${method} ${path}`, scope]),
    );
    expect(documented).toEqual(EXPECTED_SCOPES);
  });

  it("the document lists every admin route the worker answers, each requiring one scope", () => {
    // The router's own list: a route added without a documented scope fails here.
    const answered = app.routes
      .filter((route) => route.path.startsWith("/admin/") && route.method !== "ALL")
      .map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}`);
    const operations = adminOperations();
    expect([...new Set(answered)].sort()).toEqual(operations.map(({ method, path }) => `${method} ${path}`).sort());
    for (const { scope } of operations) expect(ADMIN_SCOPES).toContain(scope);
  });

  // A body each call would carry out: the scope alone must stop it.
  const bodies: Record<string, (userId: string, token: string) => unknown> = {
    "POST /admin/sessions": (userId) => ({ userId }),
    "POST /admin/sessions/reauthenticate": (_, token) => ({ token, factors: ["pwd"] }),
    "POST /admin/users/{userId}/sessions/end": () => ({ reason: "admin" }),
    "POST /admin/sessions/{sessionId}/end": () => ({ reason: "admin" }),
    "POST /admin/support-sessions": (userId) => ({ userId, agentId: "agent-scope", reason: "T-1" }),
    "PUT /admin/sessions/{sessionId}/data": () => ({ tenant: "acme" }),
    "PATCH /admin/sessions/{sessionId}/data": () => ({ tenant: "acme" }),
    "POST /admin/agents/{agentId}/support-sessions/end": () => ({ reason: "admin" }),
    "POST /admin/organizations/{id}/sessions/end": () => ({ reason: "admin" }),
    "POST /admin/organizations/{id}/sessions/hold": () => ({ reason: "admin" }),
    "POST /admin/organizations/{id}/providers": () => providerEntry(`p-${crypto.randomUUID().slice(0, 8)}`),
    "PUT /admin/organizations/{id}/providers/{provider}": () => ({ ...providerEntry("x"), name: undefined }),
    "PATCH /admin/organizations/{id}/providers/{provider}": () => ({ enabled: false }),
    "POST /admin/organizations": () => ({ name: "Scoped" }),
    "PATCH /admin/organizations/{id}": () => ({ name: "Renamed" }),
    "PUT /admin/organizations/{id}/policy": () => ({ idleTimeoutSeconds: 900 }),
  };

  // The expected scope, not the declared one: a route that asks another scope fails here.
  for (const [route, scope] of Object.entries(EXPECTED_SCOPES)) {
    const [method, path] = route.split(" ") as [string, string];
    it(`${method} ${path}: a key with every scope but ${scope} is 403 insufficient_scope, nothing written`, async () => {
      const userId = newUser();
      const session = await issue(userId);
      // An organization with a provider, for its routes: made directly (test/organization-fixtures.ts).
      const organization = path.includes("{id}") ? await newOrganization() : "";
      const provider = `p-${crypto.randomUUID().slice(0, 8)}`;
      if (organization !== "") {
        const registrar = await adminKey(["organizations"]);
        const path = `/admin/organizations/${organization}/providers`;
        expect((await admin(registrar.vars, registrar.key, "POST", path, providerEntry(provider))).status).toBe(201);
      }
      const concrete = path
        .replace("{id}", organization)
        .replace("{userId}", encodeURIComponent(userId))
        .replace("{sessionId}", session.id)
        .replace("{agentId}", "agent-scope")
        .replace("{id}", organization)
        .replace("{provider}", provider);
      const body = bodies[route]?.(userId, session.token);
      const others = await adminKey(ADMIN_SCOPES.filter((held) => held !== scope));
      const before = [await tableSnapshot(), await tableSnapshot("session_events")];
      await expectError(await admin(others.vars, others.key, method, concrete, body), 403, "insufficient_scope", {
        wwwAuthenticate: `Bearer realm="admin", error="insufficient_scope", scope="${scope}"`,
      });
      expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
      // The scope alone is enough: the same call with a key of only that scope is carried out.
      const own = await adminKey([scope]);
      expect((await admin(own.vars, own.key, method, concrete, body)).status).toBeLessThan(300);
    });
  }
});
