import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bucketOf, openShards, parseShardMap } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import { BUCKET_COUNT, placementOf } from "../src/domain/token.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { issueSession } from "../src/services/issue-session.ts";
import {
  bearer,
  bindingOfUser,
  CHALLENGE,
  CHROME_MAC,
  call,
  callWith,
  d1,
  expectError,
  isLive,
  issue,
  newUser,
  newUserOn,
  REJECTED_CHALLENGE,
  scopeWith,
  sessionIdsOf,
  shardBindings,
  tableSnapshot,
  twoRegions,
} from "./helpers.ts";

// Choosing a database: placement by user id, ids that name their database, the shard map's
// checks and regions.

afterEach(() => {
  vi.restoreAllMocks();
});

const all = (binding: string) => JSON.stringify({ default: { [`0-${BUCKET_COUNT - 1}`]: binding } });

describe("placement", () => {
  it("a session lives on its user's database, and its id names the user's bucket", async () => {
    for (let i = 0; i < 20; i++) {
      const user = newUser();
      const session = await issue(user);
      expect(placementOf(session.id)).toEqual({ region: "default", bucket: await bucketOf(user) });
      expect(await sessionIdsOf(user)).toEqual([session.id]);
      for (const binding of shardBindings()) {
        const { results } = await d1(binding).prepare("SELECT id FROM sessions WHERE user_id = ?").bind(user).all();
        expect({ binding, rows: results.length }).toEqual({
          binding,
          rows: binding === (await bindingOfUser(user)) ? 1 : 0,
        });
      }
    }
  });

  it("ids stay URL-safe with 128 random bits after the bucket", async () => {
    const session = await issue(newUser());
    expect(session.id).toMatch(/^[A-Za-z0-9_-]{2}[A-Za-z0-9_-]{22}$/);
    expect(session.token).toHaveLength(24 + 1 + 43);
  });

  it("every user of the suite's deployment spreads over every database", async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) seen.add(await bindingOfUser(newUser()));
    expect([...seen].sort()).toEqual([...shardBindings()].sort());
  });
});

describe("a session id in another database than the caller's", () => {
  it("is answered exactly like another user's session, changing nothing anywhere", async () => {
    const bindings = shardBindings();
    const mallory = await issue(await newUserOn(bindings[0] as string));
    const victim = await issue(await newUserOn(bindings.at(-1) as string));
    const before = await tableSnapshot();
    await expectError(
      await call("DELETE", `/auth/sessions/${victim.id}`, bearer(mallory.token)),
      401,
      "not_authorized",
      {
        wwwAuthenticate: CHALLENGE,
      },
    );
    // Authentication first: a dead caller learns nothing about the id.
    await call("POST", "/auth/logout", bearer(mallory.token));
    const afterLogout = await tableSnapshot();
    await expectError(
      await call("DELETE", `/auth/sessions/${victim.id}`, bearer(mallory.token)),
      401,
      "invalid_token",
      {
        wwwAuthenticate: REJECTED_CHALLENGE,
      },
    );
    expect(await tableSnapshot()).toEqual(afterLogout);
    expect(afterLogout).toEqual(before.filter((row) => (row as { id: string }).id !== mallory.id));
    expect(await isLive(victim.token)).toBe(true);
  });
});

describe("the shard map", () => {
  const cases: [string, string][] = [
    ["not JSON", "{default"],
    ["no default region", JSON.stringify({ eu: { "0-4095": "DB" } })],
    ["a gap", JSON.stringify({ default: { "0-4094": "DB" } })],
    ["an overlap", JSON.stringify({ default: { "0-4095": "DB", "7-7": "DB_1" } })],
    ["a range past the last bucket", JSON.stringify({ default: { "0-4096": "DB" } })],
    ["a reversed range", JSON.stringify({ default: { "4095-0": "DB" } })],
    ["a bad region name", JSON.stringify({ default: { "0-4095": "DB" }, Europe: { "0-4095": "DB_1" } })],
    ["one database in two regions", JSON.stringify({ default: { "0-4095": "DB" }, eu: { "0-4095": "DB" } })],
    ["no binding", JSON.stringify({ default: { "0-4095": "" } })],
  ];
  for (const [why, text] of cases) {
    it(`is refused, saying why, with ${why}`, () => {
      expect(() => parseShardMap(text)).toThrow(/SHARDS/);
    });
  }

  it("is refused when it names a binding the worker does not have; requests then answer 500", async () => {
    const broken = { SHARDS: all("DB_MISSING") };
    expect(() => openShards({ ...env, ...broken })).toThrow("SHARDS names DB_MISSING, which is not a D1 binding");
    const errors: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: unknown) => void errors.push(String(line)));
    vi.spyOn(console, "log").mockImplementation(() => {});
    const session = await issue(newUser());
    await expectError(await callWith(broken, "GET", "/auth/sessions", bearer(session.token)), 500, "internal_error");
    expect(errors.map((line) => JSON.parse(line))).toEqual([
      {
        level: "error",
        event: "config_error",
        message: "SHARDS names DB_MISSING, which is not a D1 binding of this worker",
        method: "GET",
        route: "/auth/sessions",
        request_id: expect.any(String),
      },
    ]);
  });
});

describe("regions", () => {
  it.runIf(shardBindings().length > 1)("places a user with a home region only on that region's databases", async () => {
    const regional = { ...env, ...twoRegions() };
    const service = new SessionService(createExecutionContext(), regional);
    const euDatabases = shardBindings().slice(shardBindings().length / 2);
    for (let i = 0; i < 10; i++) {
      const user = newUser();
      const session = await service.create({ userId: user, region: "eu", userAgent: CHROME_MAC });
      expect(session.id).toMatch(/^eu[A-Za-z0-9_-]{24}$/);
      const binding = openShards(regional).forSession(session.id)?.binding as string;
      expect(euDatabases).toContain(binding);
      const response = await callWith(twoRegions(), "GET", "/auth/sessions", bearer(session.token));
      expect(response.status).toBe(200);
      expect(await service.authenticate(session.token)).toMatchObject({ userId: user, sessionId: session.id });
    }
  });

  it.runIf(shardBindings().length > 1)(
    "lists and ends a regional user's sessions given the region; without it, the default region's databases have none",
    async () => {
      const service = new SessionService(createExecutionContext(), { ...env, ...twoRegions() });
      const user = newUser();
      const kept = await service.create({ userId: user, region: "eu" });
      const other = await service.create({ userId: user, region: "eu" });
      expect((await service.listUserSessions(user, "eu")).map((s) => s.id).sort()).toEqual([kept.id, other.id].sort());
      expect(await service.listUserSessions(user)).toEqual([]);
      expect(await service.endUserSessions({ userId: user, reason: "admin" })).toEqual({ ended: 0 });
      expect(
        await service.endUserSessions({ userId: user, exceptSessionId: kept.id, reason: "admin", region: "eu" }),
      ).toEqual({ ended: 1 });
      expect(await service.authenticate(other.token)).toBeNull();
      // A session id names its database: no region needed.
      expect(await service.endSession({ sessionId: kept.id, reason: "admin" })).toEqual({ ended: true });
      expect(await service.listUserSessions(user, "eu")).toEqual([]);
    },
  );

  it("refuses a region the deployment does not configure, before writing anything", async () => {
    const before = await tableSnapshot();
    for (const region of ["us", "EU", "", 42]) {
      await expect(
        issueSession(scopeWith(openShards(env), readConfig(env)), { userId: newUser(), region: region as string }),
      ).rejects.toThrow(/region must be one of the configured regions/);
    }
    expect(await tableSnapshot()).toEqual(before);
  });
});
