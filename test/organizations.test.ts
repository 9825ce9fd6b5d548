import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { decodeJwt } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { AdminScope } from "../src/domain/admin-keys.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  callWith,
  d1,
  databases,
  expectError,
  isLive,
  newUser,
  shardBindings,
  tableSnapshot,
} from "./helpers.ts";
import { admin, adminKey, newOrganization } from "./organization-fixtures.ts";
import { accessTokenVars } from "./ssf.ts";

// Organizations as data (docs/organizations.md): the directory over the admin API, each
// organization's policy row on every database, and keys limited to one organization.

afterEach(() => {
  vi.restoreAllMocks();
});

interface Organization {
  id: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

const INVALID = (detail: string) => ({
  code: "invalid_input",
  message: "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
  detail,
});

/** An id as a caller draws one: `org_` and 16 random bytes in base64url. */
function drawnId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `org_${btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "")}`;
}

/** The databases holding `id`'s policy row, by binding: every one of the deployment, DB included. */
async function policyRows(id: string): Promise<string[]> {
  const bindings = [...new Set(["DB", ...shardBindings()])];
  const holding: string[] = [];
  for (const binding of bindings) {
    const row = await d1(binding)
      .prepare("SELECT organization_id FROM organization_policies WHERE organization_id = ?")
      .bind(id)
      .first();
    if (row) holding.push(binding);
  }
  return holding;
}

const EVERY_DATABASE = () => [...new Set(["DB", ...shardBindings()])];

async function directoryRow(id: string) {
  return d1("DB").prepare("SELECT id, name FROM organizations WHERE id = ?").bind(id).first();
}

/** Every console line written from here on, whatever the level. */
function captureConsole(): string[] {
  const lines: string[] = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const)
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
  return lines;
}

describe("organizations: the directory over the admin API", () => {
  it("creates, reads, renames and removes one: exact bodies, a policy row on every database", async () => {
    const { vars, key } = await adminKey();
    const created = await admin(vars, key, "POST", "/admin/organizations", { name: "Acme Corp" });
    expect(created.status).toBe(201);
    expect(created.headers.get("Cache-Control")).toBe("no-store");
    const organization = (await created.json()) as Organization;
    expect(organization).toEqual({
      id: expect.stringMatching(/^org_[A-Za-z0-9_-]{22}$/),
      name: "Acme Corp",
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: organization.createdAt,
    });
    expect(await policyRows(organization.id)).toEqual(EVERY_DATABASE());

    const read = await admin(vars, key, "GET", `/admin/organizations/${organization.id}`);
    expect({ status: read.status, body: await read.json() }).toEqual({ status: 200, body: organization });

    const renamed = await admin(vars, key, "PATCH", `/admin/organizations/${organization.id}`, { name: "Acme, Inc." });
    expect(renamed.status).toBe(200);
    const after = (await renamed.json()) as Organization;
    expect(after).toEqual({ ...organization, name: "Acme, Inc.", updatedAt: after.updatedAt });
    expect(Date.parse(after.updatedAt)).toBeGreaterThanOrEqual(Date.parse(organization.updatedAt));

    const removed = await admin(vars, key, "DELETE", `/admin/organizations/${organization.id}`);
    expect(removed.status).toBe(204);
    expect(await removed.text()).toBe("");
    expect(await directoryRow(organization.id)).toBeNull();
    expect(await policyRows(organization.id)).toEqual([]);
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { name: "Gone" }],
      ["DELETE", undefined],
    ] as const)
      await expectError(
        await admin(vars, key, method, `/admin/organizations/${organization.id}`, body),
        404,
        "organization_not_found",
      );
  });

  it("a retry with the caller's id answers the same organization and completes a database the first missed", async () => {
    const { vars, key } = await adminKey();
    const id = drawnId();
    const first = await admin(vars, key, "POST", "/admin/organizations", { id, name: "Retry Ltd" });
    const stored = await first.json();
    expect(first.status).toBe(201);
    // As if the first attempt had failed on the last database: its policy row is missing.
    const last = EVERY_DATABASE().at(-1) as string;
    await d1(last).prepare("DELETE FROM organization_policies WHERE organization_id = ?").bind(id).run();
    const again = await admin(vars, key, "POST", "/admin/organizations", { id, name: "Retry Ltd" });
    expect({ status: again.status, body: await again.json() }).toEqual({ status: 201, body: stored });
    expect(await policyRows(id)).toEqual(EVERY_DATABASE());
    // The id with another name is not a retry: refused, nothing changed.
    const other = await admin(vars, key, "POST", "/admin/organizations", { id, name: "Someone Else" });
    expect({ status: other.status, body: await other.json() }).toEqual({
      status: 400,
      body: INVALID("id names an organization that exists under another name"),
    });
    expect(await directoryRow(id)).toEqual({ id, name: "Retry Ltd" });
    // A removal half done (the directory's entry gone, a policy row left) is finished by its retry.
    await d1("DB").prepare("DELETE FROM organizations WHERE id = ?").bind(id).run();
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${id}`)).status).toBe(204);
    expect(await policyRows(id)).toEqual([]);
  });

  it("refuses bad input with a 400 naming the member, and writes nothing", async () => {
    const { vars, key } = await adminKey();
    const before = (await d1("DB").prepare("SELECT count(*) AS n FROM organizations").first())?.n;
    const NAME_RULE = "name must be 1 to 100 printable characters, no leading or trailing space";
    const cases: [unknown, string][] = [
      [{}, NAME_RULE],
      [{ name: "" }, NAME_RULE],
      [{ name: " Acme" }, NAME_RULE],
      [{ name: "Acme\n" }, NAME_RULE],
      [{ name: "Ac\u0000me" }, NAME_RULE],
      [{ name: "Ac\u200Bme" }, NAME_RULE],
      [{ name: "x".repeat(101) }, NAME_RULE],
      [{ name: 42 }, NAME_RULE],
      [{ name: "Acme", id: "acme" }, "id must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -"],
      [{ name: "Acme", plan: "gold" }, "plan is not a member this call takes (name, id)"],
      ["[]", "the body must be a JSON object"],
    ];
    for (const [body, detail] of cases) {
      const response = await admin(vars, key, "POST", "/admin/organizations", body);
      expect({ status: response.status, body: await response.json() }).toEqual({ status: 400, body: INVALID(detail) });
    }
    expect((await d1("DB").prepare("SELECT count(*) AS n FROM organizations").first())?.n).toBe(before);

    const { id } = (await (
      await admin(vars, key, "POST", "/admin/organizations", { name: "Strict" })
    ).json()) as Organization;
    const renamed = await admin(vars, key, "PATCH", `/admin/organizations/${id}`, { name: "  " });
    expect({ status: renamed.status, body: await renamed.json() }).toEqual({ status: 400, body: INVALID(NAME_RULE) });
    const stray = await admin(vars, key, "PATCH", `/admin/organizations/${id}`, { name: "Ok", id });
    expect({ status: stray.status, body: await stray.json() }).toEqual({
      status: 400,
      body: INVALID("id is not a member this call takes (name)"),
    });
    expect(await directoryRow(id)).toEqual({ id, name: "Strict" });
    const malformed = await admin(vars, key, "GET", "/admin/organizations/acme");
    expect({ status: malformed.status, body: await malformed.json() }).toEqual({
      status: 400,
      body: INVALID("id must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -"),
    });
    for (const [query, detail] of [
      ["limit=0", "limit must be an integer from 1 to 100"],
      ["limit=101", "limit must be an integer from 1 to 100"],
      ["limit=two", "limit must be an integer from 1 to 100"],
      ["cursor=abc", "cursor must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -"],
      ["page=2", "page is not a parameter this call takes (limit, cursor)"],
    ] as const) {
      const response = await admin(vars, key, "GET", `/admin/organizations?${query}`);
      expect({ status: response.status, body: await response.json() }).toEqual({ status: 400, body: INVALID(detail) });
    }
  });

  it("lists the directory a page at a time, in id order, to the last page", async () => {
    const { vars, key } = await adminKey();
    const made: Organization[] = [];
    for (const name of ["One", "Two", "Three"])
      made.push((await (await admin(vars, key, "POST", "/admin/organizations", { name })).json()) as Organization);
    const seen: Organization[] = [];
    let cursor: string | null = null;
    do {
      const page = await admin(
        vars,
        key,
        "GET",
        `/admin/organizations?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`,
      );
      expect(page.status).toBe(200);
      const body = (await page.json()) as { organizations: Organization[]; nextCursor: string | null };
      expect(body.organizations.length).toBeLessThanOrEqual(2);
      if (body.nextCursor !== null) expect(body.nextCursor).toBe(body.organizations.at(-1)?.id);
      seen.push(...body.organizations);
      cursor = body.nextCursor;
    } while (cursor !== null);
    const ids = seen.map((organization) => organization.id);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(ids.length);
    for (const organization of made) expect(seen).toContainEqual(organization);
  });

  it("a key limited to one organization reaches it alone: every other is 404 and logged", async () => {
    const operator = await adminKey();
    const create = async (name: string) =>
      (await (
        await admin(operator.vars, operator.key, "POST", "/admin/organizations", { name })
      ).json()) as Organization;
    const [own, other] = [await create("Own"), await create("Other")];
    const limited = await adminKey(["organizations"], own.id);
    const call = (method: string, path: string, body?: unknown) => admin(limited.vars, limited.key, method, path, body);

    const list = await call("GET", "/admin/organizations");
    expect(await list.json()).toEqual({ organizations: [own], nextCursor: null });
    expect(await (await call("GET", `/admin/organizations/${own.id}`)).json()).toEqual(own);

    const lines = captureConsole();
    for (const [method, path, body] of [
      ["GET", `/admin/organizations/${other.id}`, undefined],
      ["PATCH", `/admin/organizations/${other.id}`, { name: "Taken over" }],
      ["DELETE", `/admin/organizations/${other.id}`, undefined],
      ["GET", "/admin/organizations/org_0000000000000000000000", undefined],
      ["POST", "/admin/organizations", { name: "New" }],
    ] as const)
      await expectError(await call(method, path, body), 404, "not_found");
    const outside = lines.map((line) => JSON.parse(line)).filter((line) => line.event === "admin_key_outside");
    expect(outside).toEqual(
      [
        ["GET", "/admin/organizations/:id"],
        ["PATCH", "/admin/organizations/:id"],
        ["DELETE", "/admin/organizations/:id"],
        ["GET", "/admin/organizations/:id"],
        ["POST", "/admin/organizations"],
      ].map(([method, route]) => ({
        level: "warn",
        event: "admin_key_outside",
        key: limited.id,
        name: "customer IT",
        organization: own.id,
        method,
        route,
      })),
    );
    expect(await directoryRow(other.id)).toEqual({ id: other.id, name: "Other" });
    expect(await policyRows(other.id)).toEqual(EVERY_DATABASE());
  });

  it("creating and removing cost one round trip on every database, reading and renaming one on DB", async () => {
    const { vars, key } = await adminKey();
    // The key's first call in this isolate also records its use, after the answer (once a minute).
    await admin(vars, key, "GET", "/admin/organizations?limit=1");
    const counted = async (method: string, path: string, body?: unknown) => {
      const counter = countingShards(databases());
      const response = await admin({ ...vars, ...counter.env }, key, method, path, body);
      return { response, roundTrips: counter.roundTrips() };
    };
    const every = Object.fromEntries(EVERY_DATABASE().map((binding) => [binding, 1]));
    const created = await counted("POST", "/admin/organizations", { name: "Counted" });
    expect(created.roundTrips).toEqual(every);
    const { id } = (await created.response.json()) as Organization;
    expect((await counted("GET", `/admin/organizations/${id}`)).roundTrips).toEqual({ DB: 1 });
    expect((await counted("PATCH", `/admin/organizations/${id}`, { name: "Recounted" })).roundTrips).toEqual({
      DB: 1,
    });
    expect((await counted("GET", "/admin/organizations")).roundTrips).toEqual({ DB: 1 });
    expect((await counted("DELETE", `/admin/organizations/${id}`)).roundTrips).toEqual(every);
  });

  it("needs the organizations scope", async () => {
    const { vars, key } = await adminKey(["sessions:create"]);
    const response = await admin(vars, key, "GET", "/admin/organizations");
    await expectError(response, 403, "insufficient_scope", {
      wwwAuthenticate: 'Bearer realm="admin", error="insufficient_scope", scope="organizations"',
    });
  });
});

const SESSIONS: AdminScope[] = ["organizations", "sessions:create", "sessions:read", "sessions:end", "sessions:data"];

/** The session's organization_id as stored. */
async function storedOrganization(userId: string, sessionId: string) {
  const row = await d1(await bindingOfUser(userId))
    .prepare("SELECT organization_id FROM sessions WHERE id = ?")
    .bind(sessionId)
    .first<{ organization_id: string | null }>();
  return row?.organization_id;
}

describe("organizations: sign-in knows it", () => {
  it("create takes the organization, its policy read in a round trip before its batch; whoami, authenticate and a backend's list show it", async () => {
    const organization = await newOrganization();
    const { vars, key } = await adminKey(SESSIONS);
    const userId = newUser();
    // The key's first call in this isolate also records its use, after the answer (once a minute).
    await admin(vars, key, "GET", `/admin/users/${newUser()}/sessions`);
    const counter = countingShards(databases());
    const created = await admin({ ...vars, ...counter.env }, key, "POST", "/admin/sessions", { userId, organization });
    expect(created.status).toBe(201);
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 2 });
    const session = (await created.json()) as { id: string; token: string };
    expect(await storedOrganization(userId, session.id)).toBe(organization);

    const whoami = await callWith(vars, "GET", "/auth/whoami", bearer(session.token));
    expect(await whoami.json()).toMatchObject({ session_id: session.id, organization });
    expect(await exports.SessionService.authenticate(session.token)).toMatchObject({ organization });
    const plain = await exports.SessionService.create({ userId });
    expect(await exports.SessionService.authenticate(plain.token)).toMatchObject({ organization: null });
    const listed = await admin(vars, key, "GET", `/admin/users/${userId}/sessions`);
    const sessions = ((await listed.json()) as { sessions: { id: string; organization: string | null }[] }).sessions;
    expect(sessions.map(({ id, organization }) => ({ id, organization }))).toEqual([
      { id: plain.id, organization: null },
      { id: session.id, organization },
    ]);
    // Over RPC too, and the user's own list does not show it.
    const overRpc = await exports.SessionService.create({ userId, organization });
    expect(await storedOrganization(userId, overRpc.id)).toBe(organization);
    const own = (await (await callWith(vars, "GET", "/auth/sessions", bearer(plain.token))).json()) as {
      sessions: object[];
    };
    for (const listedSession of own.sessions) expect(listedSession).not.toHaveProperty("organization");
  });

  it("an organization that does not exist, or a malformed id: refused naming it, nothing written, nobody evicted", async () => {
    const { vars, key } = await adminKey(SESSIONS);
    const userId = newUser();
    // At the cap, a new session would evict the oldest: a refused one must not.
    const kept = await exports.SessionService.create({ userId });
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    const unknown = "org_0000000000000000000000";
    // One session per user: had it been created, it would have evicted `kept`.
    const capped = { ...vars, SESSION_MAX_PER_USER: "1" } as Partial<Env>;
    const refused = await admin(capped, key, "POST", "/admin/sessions", { userId, organization: unknown });
    expect({ status: refused.status, body: await refused.json() }).toEqual({
      status: 400,
      body: INVALID(`organization ${unknown} names no organization of this service`),
    });
    const malformed = await admin(vars, key, "POST", "/admin/sessions", { userId, organization: "acme" });
    expect({ status: malformed.status, body: await malformed.json() }).toEqual({
      status: 400,
      body: INVALID("organization must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -"),
    });
    // In this isolate: a refusal over the RPC's loopback is also reported as uncaught there.
    const service = new SessionService(createExecutionContext(), env);
    await expect(service.create({ userId, organization: unknown })).rejects.toMatchObject({
      name: "RangeError",
      message: `organization ${unknown} names no organization of this service`,
    });
    await expect(service.create({ userId, organization: 42 as unknown as string })).rejects.toMatchObject({
      name: "TypeError",
      message: "organization must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -",
    });
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    expect(await isLive(kept.token)).toBe(true);
  });

  it("a removed organization takes no new sessions", async () => {
    const { vars, key } = await adminKey(SESSIONS);
    const organization = await newOrganization();
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${organization}`)).status).toBe(204);
    const refused = await admin(vars, key, "POST", "/admin/sessions", { userId: newUser(), organization });
    expect({ status: refused.status, body: await refused.json() }).toEqual({
      status: 400,
      body: INVALID(`organization ${organization} names no organization of this service`),
    });
  });

  it("an access token carries the organization only when ACCESS_TOKEN_ORGANIZATION_CLAIM names its claim", async () => {
    const organization = await newOrganization();
    const tokenVars = await accessTokenVars();
    const member = await exports.SessionService.create({ userId: newUser(), organization });
    const outside = await exports.SessionService.create({ userId: newUser() });
    const mint = async (vars: Partial<Env>, token: string) =>
      decodeJwt(
        ((await (await callWith(vars, "POST", "/auth/token", bearer(token))).json()) as { access_token: string })
          .access_token,
      );
    expect(await mint(tokenVars, member.token)).not.toHaveProperty("org_id");
    const opted = { ...tokenVars, ACCESS_TOKEN_ORGANIZATION_CLAIM: "org_id" };
    expect((await mint(opted, member.token)).org_id).toBe(organization);
    expect(await mint(opted, outside.token)).not.toHaveProperty("org_id");
    for (const name of ["sub", "org id", "tenant"]) {
      const refused = await callWith(
        { ...opted, ACCESS_TOKEN_DATA_CLAIMS: "tenant", ACCESS_TOKEN_ORGANIZATION_CLAIM: name },
        "POST",
        "/auth/token",
        bearer(member.token),
      );
      expect(refused.status).toBe(500);
    }
  });
});

describe("organizations: a key limited to one acts on its sessions alone", () => {
  async function setUp() {
    const [own, other] = [await newOrganization("Own"), await newOrganization("Other")];
    const limited = await adminKey(SESSIONS, own);
    const userId = newUser();
    const mine = await exports.SessionService.create({ userId, organization: own });
    const theirs = await exports.SessionService.create({ userId, organization: other });
    const none = await exports.SessionService.create({ userId });
    const call = (method: string, path: string, body?: unknown) => admin(limited.vars, limited.key, method, path, body);
    return { own, other, limited, userId, mine, theirs, none, call };
  }

  /** The admin_key_outside lines among `lines`, as method and route. */
  const outside = (lines: string[]) =>
    lines
      .map((line) => JSON.parse(line))
      .filter((line) => line.event === "admin_key_outside")
      .map(({ method, route }) => `${method} ${route}`);

  it("creates in its organization, named or not; another or none is 404, logged, nothing written", async () => {
    const { own, other, userId, call } = await setUp();
    const created = (await (await call("POST", "/admin/sessions", { userId })).json()) as { id: string };
    expect(await storedOrganization(userId, created.id)).toBe(own);
    const named = (await (await call("POST", "/admin/sessions", { userId, organization: own })).json()) as {
      id: string;
    };
    expect(await storedOrganization(userId, named.id)).toBe(own);
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    const lines = captureConsole();
    await expectError(await call("POST", "/admin/sessions", { userId, organization: other }), 404, "not_found");
    await expectError(await call("POST", "/admin/sessions", { userId, organization: null }), 404, "not_found");
    expect(outside(lines)).toEqual(["POST /admin/sessions", "POST /admin/sessions"]);
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
  });

  it("a sign-in in its organization evicts none of another's, whatever the cap", async () => {
    const { own, userId, mine, theirs, none, limited } = await setUp();
    const capped = { ...limited.vars, SESSION_MAX_PER_USER: "1" } as Partial<Env>;
    const created = await admin(capped, limited.key, "POST", "/admin/sessions", { userId });
    expect(created.status).toBe(201);
    // Its own organization's older session made way; the others' were not its to count or end.
    expect([await isLive(mine.token), await isLive(theirs.token), await isLive(none.token)]).toEqual([
      false,
      true,
      true,
    ]);
    expect(await storedOrganization(userId, ((await created.json()) as { id: string }).id)).toBe(own);
  });

  it("a sign-in outside any organization evicts none of a member's, whatever the cap", async () => {
    const { userId, mine, theirs, none } = await setUp();
    const { vars, key } = await adminKey(["sessions:create"]);
    const capped = { ...vars, SESSION_MAX_PER_USER: "1" } as Partial<Env>;
    expect((await admin(capped, key, "POST", "/admin/sessions", { userId })).status).toBe(201);
    // The one outside any organization made way; the members' sessions were not its to count or end.
    expect([await isLive(mine.token), await isLive(theirs.token), await isLive(none.token)]).toEqual([
      true,
      true,
      false,
    ]);
  });

  it("lists and ends a user's sessions of its organization alone, in the call's one round trip", async () => {
    const { userId, mine, theirs, none, call, limited } = await setUp();
    await call("GET", `/admin/users/${newUser()}/sessions`);
    const listed = await call("GET", `/admin/users/${userId}/sessions`);
    const sessions = ((await listed.json()) as { sessions: { id: string }[] }).sessions;
    expect(sessions.map((session) => session.id)).toEqual([mine.id]);
    const counter = countingShards(databases());
    const ended = await admin(
      { ...limited.vars, ...counter.env },
      limited.key,
      "POST",
      `/admin/users/${userId}/sessions/end`,
      {
        reason: "admin",
      },
    );
    expect({ status: ended.status, body: await ended.json() }).toEqual({ status: 200, body: { ended: 1 } });
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 1 });
    expect([await isLive(mine.token), await isLive(theirs.token), await isLive(none.token)]).toEqual([
      false,
      true,
      true,
    ]);
  });

  it("ends, changes the data of and re-authenticates its sessions alone: any other is 404 as if absent, logged", async () => {
    const { mine, theirs, none, call } = await setUp();
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    const lines = captureConsole();
    for (const session of [theirs, none, { id: "not-a-session", token: "not-a-token" }]) {
      await expectError(
        await call("POST", `/admin/sessions/${session.id}/end`, { reason: "admin" }),
        404,
        "session_not_found",
      );
      await expectError(await call("PUT", `/admin/sessions/${session.id}/data`, { a: 1 }), 404, "session_not_found");
      await expectError(await call("PATCH", `/admin/sessions/${session.id}/data`, { a: 1 }), 404, "session_not_found");
      await expectError(
        await call("POST", "/admin/sessions/reauthenticate", { token: session.token, factors: ["pwd"] }),
        404,
        "session_not_found",
      );
    }
    expect(outside(lines)).toEqual(
      Array(3)
        .fill([
          "POST /admin/sessions/:sessionId/end",
          "PUT /admin/sessions/:sessionId/data",
          "PATCH /admin/sessions/:sessionId/data",
          "POST /admin/sessions/reauthenticate",
        ])
        .flat(),
    );
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    expect([await isLive(theirs.token), await isLive(none.token)]).toEqual([true, true]);
    // Its own: as for any key.
    expect(await (await call("PUT", `/admin/sessions/${mine.id}/data`, { a: 1 })).json()).toEqual({ updated: true });
    const reissued = await call("POST", "/admin/sessions/reauthenticate", { token: mine.token, factors: ["pwd"] });
    expect(reissued.status).toBe(200);
    const { token } = (await reissued.json()) as { token: string };
    expect(await (await call("POST", `/admin/sessions/${mine.id}/end`, { reason: "admin" })).json()).toEqual({
      ended: true,
    });
    expect(await isLive(token)).toBe(false);
  });

  it("support access is outside any organization's key: 404, logged", async () => {
    const { own, userId } = await setUp();
    const support = await adminKey(["support"], own);
    const lines = captureConsole();
    await expectError(
      await admin(support.vars, support.key, "POST", "/admin/support-sessions", {
        userId,
        agentId: "agent-1",
        reason: "T-1",
      }),
      404,
      "not_found",
    );
    await expectError(
      await admin(support.vars, support.key, "POST", "/admin/agents/agent-1/support-sessions/end", { reason: "admin" }),
      404,
      "not_found",
    );
    expect(outside(lines)).toEqual([
      "POST /admin/support-sessions",
      "POST /admin/agents/:agentId/support-sessions/end",
    ]);
  });
});
