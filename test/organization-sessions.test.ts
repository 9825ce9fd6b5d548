import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { createLocalJWKSet, decodeJwt, exportJWK, generateKeyPair, type JSONWebKeySet, jwtVerify } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { AdminScope } from "../src/domain/admin-keys.ts";
import { newOrganizationId } from "../src/domain/organizations/organization.ts";
import { randomBase64Url } from "../src/domain/token.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards } from "./d1.ts";
import {
  CHROME_MAC,
  callWith,
  d1,
  d1OfUser,
  databases,
  expectError,
  isLive,
  issue,
  newUser,
  newUserOn,
  shardBindings,
  tableSnapshot,
} from "./helpers.ts";
import { admin, adminKey, newOrganization } from "./organization-fixtures.ts";
import { ISSUER, newReceiver, ssfCall, transmitter } from "./ssf.ts";

// An organization's sessions all at once (a customer offboarded, an incident): ended or held on
// every database, a bounded part a call, each logged with the reason and the key, sent on as
// CAEP; and listed a page at a time.

afterEach(() => {
  vi.restoreAllMocks();
});

const ALL: AdminScope[] = ["sessions:create", "sessions:read", "sessions:end", "sessions:data", "support"];

const INVALID = (detail: string) => ({
  code: "invalid_input",
  message: "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
  detail,
});

/** A member's session of `organizationId` for `userId` (a new user when omitted). */
async function member(organizationId: string, userId = newUser()) {
  const session = await issue(userId, { organization: organizationId });
  return { ...session, userId };
}

/** The events logged about these sessions, as (session, type, reason, key, organization). */
async function eventsOf(sessions: { id: string; userId: string }[], type: string) {
  const rows: unknown[] = [];
  for (const { id, userId } of sessions) {
    const { results } = await (await d1OfUser(userId))
      .prepare(
        "SELECT session_id, type, reason, admin_key_id, organization_id FROM session_events WHERE session_id = ? AND type = ?",
      )
      .bind(id, type)
      .all();
    rows.push(...results);
  }
  return rows;
}

/**
 * An organization with a member's session on every database (two on the first), a
 * non-member session of its first user, and a member of another organization.
 */
async function organizationOnEveryDatabase() {
  const organizationId = await newOrganization();
  const other = await newOrganization("Globex");
  const members = [];
  for (const binding of shardBindings()) members.push(await member(organizationId, await newUserOn(binding)));
  const first = members[0] as (typeof members)[number];
  members.push(await member(organizationId, first.userId));
  const outside = [await issue(first.userId), await member(other)];
  return { organizationId, other, members, outside };
}

/** One round trip to each database. */
const oncePerDatabase = () => Object.fromEntries(shardBindings().map((binding) => [binding, 1]));

/** The response of a call made on counting databases, and the round trips it made. */
async function counted(vars: Partial<Env>, key: string, method: string, path: string, body?: unknown) {
  const counter = countingShards(databases());
  const response = await admin({ ...vars, ...counter.env }, key, method, path, body);
  return { response, roundTrips: counter.roundTrips() };
}

describe("POST /admin/organizations/{id}/sessions/end", () => {
  it("ends every member's session on every database, one round trip to each, none outside; logged with the reason and the key", async () => {
    const { vars, key, id } = await adminKey(ALL);
    const { organizationId, other, members, outside } = await organizationOnEveryDatabase();
    // The key's first call in this isolate also records its use, after the answer.
    await admin(vars, key, "GET", `/admin/organizations/${other}/sessions`);
    const { response, roundTrips } = await counted(
      vars,
      key,
      "POST",
      `/admin/organizations/${organizationId}/sessions/end`,
      {
        reason: "customer_offboarded",
      },
    );
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { ended: members.length, moving: 0, complete: true },
    });
    expect(roundTrips).toEqual(oncePerDatabase());
    for (const session of members) expect(await isLive(session.token)).toBe(false);
    for (const session of outside) expect(await isLive(session.token)).toBe(true);
    expect(await eventsOf(members, "ended")).toEqual(
      members.map((session) => ({
        session_id: session.id,
        type: "ended",
        reason: "customer_offboarded",
        admin_key_id: id,
        organization_id: organizationId,
      })),
    );
    // Again: nothing left.
    expect(
      await (
        await admin(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/end`, {
          reason: "customer_offboarded",
        })
      ).json(),
    ).toEqual({ ended: 0, moving: 0, complete: true });
  });

  it(`is bounded: at most 100 a database a call, "complete": false until none is left`, async () => {
    const { vars, key } = await adminKey(ALL);
    const organizationId = await newOrganization();
    const userId = await newUserOn("DB");
    const first = await member(organizationId, userId);
    // 100 more rows of the same user on DB, copies of the first with ids of its bucket.
    const db = d1("DB");
    const { results } = await db.prepare("SELECT name FROM pragma_table_info('sessions')").all<{ name: string }>();
    const columns = results.map((row) => row.name);
    const copied = columns.map((column) => (column === "id" ? "?" : `"${column}"`)).join(", ");
    const insert = `INSERT INTO sessions (${columns.map((column) => `"${column}"`).join(", ")}) SELECT ${copied} FROM sessions WHERE id = ?`;
    const bucket = first.id.slice(0, -22);
    await db.batch(
      Array.from({ length: 100 }, () => db.prepare(insert).bind(`${bucket}${randomBase64Url(16)}`, first.id)),
    );
    // The key's first call in this isolate also records its use, after the answer.
    await admin(vars, key, "GET", `/admin/organizations/${organizationId}/sessions?limit=1`);
    const end = () =>
      counted(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/end`, { reason: "incident" });
    const once = await end();
    expect({ body: await once.response.json(), roundTrips: once.roundTrips }).toEqual({
      body: { ended: 100, moving: 0, complete: false },
      roundTrips: oncePerDatabase(),
    });
    const twice = await end();
    expect({ body: await twice.response.json(), roundTrips: twice.roundTrips }).toEqual({
      body: { ended: 1, moving: 0, complete: true },
      roundTrips: oncePerDatabase(),
    });
    const left = await db
      .prepare("SELECT count(*) AS n FROM sessions WHERE organization_id = ?")
      .bind(organizationId)
      .first();
    expect(left).toEqual({ n: 0 });
  });

  it("a session in a bucket being moved is left for the next call, and counted", async () => {
    const { vars, key } = await adminKey(ALL);
    const organizationId = await newOrganization();
    const moving = await member(organizationId, await newUserOn("DB"));
    const db = d1("DB");
    const bucket = moving.id.slice(0, -22);
    await db
      .prepare("INSERT INTO bucket_moves (bucket, state, binding, updated_at) VALUES (?, 'frozen', 'DB', 0)")
      .bind(bucket)
      .run();
    try {
      const response = await admin(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/end`, {
        reason: "incident",
      });
      expect(await response.json()).toEqual({ ended: 0, moving: 1, complete: false });
    } finally {
      await db.prepare("DELETE FROM bucket_moves WHERE bucket = ?").bind(bucket).run();
    }
    const after = await admin(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/end`, {
      reason: "incident",
    });
    expect(await after.json()).toEqual({ ended: 1, moving: 0, complete: true });
  });
});

describe("POST /admin/organizations/{id}/sessions/hold", () => {
  it("holds every member's session until its user signs in again, one round trip to each database; logged `held`", async () => {
    const { vars, key, id } = await adminKey(ALL);
    const { organizationId, other, members, outside } = await organizationOnEveryDatabase();
    await admin(vars, key, "GET", `/admin/organizations/${other}/sessions`);
    const { response, roundTrips } = await counted(
      vars,
      key,
      "POST",
      `/admin/organizations/${organizationId}/sessions/hold`,
      {
        reason: "incident-42",
      },
    );
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { held: members.length, moving: 0, complete: true },
    });
    expect(roundTrips).toEqual(oncePerDatabase());
    for (const session of members)
      expect(await exports.SessionService.authenticate(session.token)).toMatchObject({
        reauthenticationRequired: true,
      });
    for (const session of outside)
      expect(await exports.SessionService.authenticate(session.token)).not.toHaveProperty("reauthenticationRequired");
    expect(await eventsOf(members, "held")).toEqual(
      members.map((session) => ({
        session_id: session.id,
        type: "held",
        reason: "incident-42",
        admin_key_id: id,
        organization_id: organizationId,
      })),
    );
    // A held session is not held again, nor logged again.
    expect(
      await (
        await admin(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/hold`, {
          reason: "incident-42",
        })
      ).json(),
    ).toEqual({ held: 0, moving: 0, complete: true });
    expect(await eventsOf(members, "held")).toHaveLength(members.length);
    // Signing in again lifts it: the same session, a new token, logged as lifting a hold.
    const first = members[0] as (typeof members)[number];
    const again = await exports.SessionService.reauthenticate({ token: first.token, factors: ["pwd"] });
    expect(await exports.SessionService.authenticate(again?.token as string)).not.toHaveProperty(
      "reauthenticationRequired",
    );
    expect(await eventsOf([first], "reauthenticated")).toMatchObject([{ reason: "hold" }]);
  });
});

describe("GET /admin/organizations/{id}/sessions", () => {
  it("lists the organization's live sessions by id, a page at a time, across every database, one round trip to each", async () => {
    const { vars, key } = await adminKey(ALL);
    const { organizationId, other, members } = await organizationOnEveryDatabase();
    await admin(vars, key, "GET", `/admin/organizations/${other}/sessions`);
    const ids = members.map((session) => session.id).sort();
    const pages: { sessions: { id: string; user_id: string }[]; nextCursor: string | null }[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "limit=2" : `limit=2&cursor=${cursor}`;
      const { response, roundTrips } = await counted(
        vars,
        key,
        "GET",
        `/admin/organizations/${organizationId}/sessions?${query}`,
      );
      expect({ status: response.status, roundTrips }).toEqual({ status: 200, roundTrips: oncePerDatabase() });
      const page = (await response.json()) as (typeof pages)[number];
      pages.push(page);
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(pages.map((page) => page.sessions.length)).toEqual(
      Array.from({ length: Math.ceil(ids.length / 2) }, (_, i) => Math.min(2, ids.length - i * 2)),
    );
    expect(pages.flatMap((page) => page.sessions.map((session) => session.id))).toEqual(ids);
    // Each as the admin list shows it, with its user.
    const first = members[0] as (typeof members)[number];
    const listed = pages.flatMap((page) => page.sessions).find((session) => session.id === first.id);
    const [own] = (await exports.SessionService.listUserSessions(first.userId)).filter((s) => s.id === first.id);
    expect(listed).toEqual({ ...own, user_id: first.userId });
    // The whole list in one page; a held session says so.
    await admin(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/hold`, { reason: "incident" });
    const whole = (await (await admin(vars, key, "GET", `/admin/organizations/${organizationId}/sessions`)).json()) as {
      sessions: { held?: boolean }[];
      nextCursor: null;
    };
    expect(whole.nextCursor).toBeNull();
    expect(whole.sessions.map((session) => session.held)).toEqual(ids.map(() => true));
  });

  it("refuses a cursor it did not give and a limit out of 1 to 100: 400 naming it", async () => {
    const { vars, key } = await adminKey(ALL);
    const organizationId = await newOrganization();
    const path = `/admin/organizations/${organizationId}/sessions`;
    for (const [query, detail] of [
      ["cursor=nope", "cursor must be a nextCursor this list answered"],
      [`cursor=${btoa("not an id")}`, "cursor must be a nextCursor this list answered"],
      ["limit=0", "limit must be a whole number from 1 to 100"],
      ["limit=101", "limit must be a whole number from 1 to 100"],
      ["limit=ten", "limit must be a whole number from 1 to 100"],
    ] as const) {
      const response = await admin(vars, key, "GET", `${path}?${query}`);
      expect({ status: response.status, body: await response.json() }).toEqual({ status: 400, body: INVALID(detail) });
    }
  });
});

describe("organization-wide calls: who may, and on what", () => {
  const ROUTES = [
    ["GET", "sessions", undefined],
    ["POST", "sessions/end", { reason: "admin" }],
    ["POST", "sessions/hold", { reason: "admin" }],
  ] as const;

  it("an organization that does not exist, or one a limited key may not reach, is 404; nothing changes", async () => {
    const { organizationId, members } = await organizationOnEveryDatabase();
    const everyone = await adminKey(ALL);
    const limited = await adminKey(ALL, await newOrganization("Initech"));
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    const log = vi.spyOn(console, "warn");
    for (const [method, tail, body] of ROUTES) {
      await expectError(
        await admin(everyone.vars, everyone.key, method, `/admin/organizations/${newOrganizationId()}/${tail}`, body),
        404,
        "not_found",
      );
      await expectError(
        await admin(limited.vars, limited.key, method, `/admin/organizations/${organizationId}/${tail}`, body),
        404,
        "not_found",
      );
    }
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    for (const session of members) expect(await isLive(session.token)).toBe(true);
    const outside = log.mock.calls
      .map(([line]) => JSON.parse(String(line)))
      .filter((line) => line.event === "admin_key_outside");
    expect(outside).toHaveLength(ROUTES.length);
  });

  it("a limited key reaches its own organization", async () => {
    const organizationId = await newOrganization();
    const session = await member(organizationId);
    const { vars, key } = await adminKey(["sessions:end"], organizationId);
    const response = await admin(vars, key, "POST", `/admin/organizations/${organizationId}/sessions/end`, {
      reason: "admin",
    });
    expect(await response.json()).toEqual({ ended: 1, moving: 0, complete: true });
    expect(await isLive(session.token)).toBe(false);
  });

  it("bad input is 400 naming the member, and nothing changes", async () => {
    const { vars, key } = await adminKey(ALL);
    const { organizationId, members } = await organizationOnEveryDatabase();
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    const cases: [string, unknown, string][] = [
      ["acme", { reason: "admin" }, "id must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -"],
      [
        organizationId,
        {},
        "reason must be 1 to 64 printable ASCII characters, not starting or ending with a space (e.g. password_changed, account_disabled, admin)",
      ],
      [
        organizationId,
        { reason: " admin" },
        "reason must be 1 to 64 printable ASCII characters, not starting or ending with a space (e.g. password_changed, account_disabled, admin)",
      ],
      [organizationId, { reason: "context_changed" }, "reason context_changed is the service's own, never a caller's"],
      [organizationId, { reason: "admin", organizationId }, "organizationId is not a member this call takes (reason)"],
    ];
    for (const verb of ["end", "hold"]) {
      for (const [id, body, detail] of cases) {
        const response = await admin(vars, key, "POST", `/admin/organizations/${id}/sessions/${verb}`, body);
        expect({ status: response.status, body: await response.json() }).toEqual({
          status: 400,
          body: INVALID(detail),
        });
      }
    }
    const listed = await admin(vars, key, "GET", "/admin/organizations/acme/sessions");
    expect(await listed.json()).toEqual(INVALID(cases[0]?.[2] as string));
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    for (const session of members) expect(await isLive(session.token)).toBe(true);
  });
});

describe("SessionService: the same over RPC", () => {
  it("ends, holds and lists an organization's sessions; null for none; bad input a TypeError", async () => {
    const service = exports.SessionService;
    const organizationId = await newOrganization();
    const [held, ended] = [await member(organizationId), await member(organizationId)];
    const all = [held.id, ended.id].sort();
    expect(await service.listOrganizationSessions({ organizationId, limit: 1 })).toMatchObject({
      sessions: [{ id: all[0] }],
      nextCursor: expect.any(String),
    });
    expect(await service.holdOrganizationSessions({ organizationId, reason: "incident" })).toEqual({
      held: 2,
      moving: 0,
      complete: true,
    });
    expect(await service.endOrganizationSessions({ organizationId, reason: "offboarded" })).toEqual({
      ended: 2,
      moving: 0,
      complete: true,
    });
    expect(await service.listOrganizationSessions({ organizationId })).toEqual({ sessions: [], nextCursor: null });
    const unknown = newOrganizationId();
    expect(await service.endOrganizationSessions({ organizationId: unknown, reason: "admin" })).toBeNull();
    expect(await service.holdOrganizationSessions({ organizationId: unknown, reason: "admin" })).toBeNull();
    expect(await service.listOrganizationSessions({ organizationId: unknown })).toBeNull();
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => null,
        ({ name, message }: Error) => ({ name, message }),
      );
    expect(await refusal(service.endOrganizationSessions({ organizationId: "acme", reason: "admin" }))).toEqual({
      name: "TypeError",
      message: "organizationId must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -",
    });
    expect(await refusal(service.listOrganizationSessions({ organizationId, limit: 500 }))).toEqual({
      name: "RangeError",
      message: "limit must be a whole number from 1 to 100",
    });
  });
});

describe("CAEP: sent on as every ending and hold is", () => {
  const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";

  it("each ending is pushed back to the provider its session signed in through; a hold is a stream's risk-level-change", async () => {
    const idpKeys = await generateKeyPair("ES256", { extractable: true });
    const name = `idp-${crypto.randomUUID().slice(0, 8)}`;
    const endpoint = `https://${name}.example/ssf/push`;
    const upstream = {
      issuer: `https://${name}.example`,
      name,
      client_id: "sessions-app",
      audience: "https://sessions.example/ssf",
      subject: "iss_sub",
      jwks: { keys: [{ ...(await exportJWK(idpKeys.publicKey)), kid: "idp1", alg: "ES256" }] },
      push: { endpoint_url: endpoint },
    };
    const { vars: transmitterVars } = await transmitter();
    const admins = await adminKey(ALL);
    const vars = { ...transmitterVars, ...admins.vars, SSF_UPSTREAMS: JSON.stringify([upstream]) };
    const receiver = await newReceiver("https://receiver.example");
    const created = await ssfCall(vars, receiver.credential, "POST", "/ssf/streams", {});
    const { stream_id } = (await created.json()) as { stream_id: string };
    const pushes: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      if (request.url === endpoint) pushes.push(await request.text());
      return new Response(null, { status: request.url === endpoint ? 202 : 404 });
    });
    const organizationId = await newOrganization();
    const userId = newUser();
    const ctx = createExecutionContext();
    const signedIn = await new SessionService(ctx, { ...env, ...vars }).create({
      userId,
      userAgent: CHROME_MAC,
      upstream: { provider: name, subject: "sub-7", sid: "sid-7" },
      organization: organizationId,
    });
    await waitOnExecutionContext(ctx);
    pushes.length = 0;

    await admin(vars, admins.key, "POST", `/admin/organizations/${organizationId}/sessions/hold`, {
      reason: "incident-7",
    });
    await admin(vars, admins.key, "POST", `/admin/organizations/${organizationId}/sessions/end`, {
      reason: "offboarded",
    });

    // The streams: the hold a risk, the ending a revocation, by the administrator.
    const polled = await ssfCall(vars, receiver.credential, "POST", `/ssf/streams/poll/${stream_id}`, {
      returnImmediately: true,
    });
    const sets = Object.values(((await polled.json()) as { sets: Record<string, string> }).sets)
      .map((set) => decodeJwt(set))
      .filter((claims) => (claims.sub_id as { session?: { id: string } }).session?.id === signedIn.id)
      .filter((claims) => !(`${CAEP}session-established` in (claims.events as object)))
      .map((claims) => claims.events as Record<string, Record<string, unknown>>);
    expect(sets).toEqual([
      {
        [`${CAEP}risk-level-change`]: {
          event_timestamp: expect.any(Number),
          principal: "SESSION",
          current_level: "HIGH",
          risk_reason: "An administrator asked (incident-7)",
          initiating_entity: "admin",
        },
      },
      {
        [`${CAEP}session-revoked`]: {
          event_timestamp: expect.any(Number),
          initiating_entity: "system",
          reason_admin: { en: "offboarded" },
        },
      },
    ]);
    // The provider: the sign-out, in its own ids (it takes no risk-level-change).
    const jwks = (await (await callWith(vars, "GET", "/ssf/jwks.json")).json()) as JSONWebKeySet;
    expect(pushes).toHaveLength(1);
    const { payload } = await jwtVerify(pushes[0] as string, createLocalJWKSet(jwks), {
      issuer: ISSUER,
      audience: upstream.issuer,
    });
    expect(payload).toMatchObject({
      sub_id: {
        format: "complex",
        user: { format: "iss_sub", iss: upstream.issuer, sub: "sub-7" },
        session: { format: "opaque", id: "sid-7" },
      },
      events: { [`${CAEP}session-revoked`]: { initiating_entity: "system", reason_admin: { en: "offboarded" } } },
    });
  });
});
