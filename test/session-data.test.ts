import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { SessionData } from "../src/domain/session-data.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { purge } from "../src/services/purge.ts";
import { countingShards, faultyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  call,
  callWith,
  d1OfUser,
  databases,
  FIREFOX_WINDOWS,
  issue,
  newUser,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";
import { standInUpstream } from "./ssf.ts";

// Application data on a session (src/domain/session-data.ts): set at create, replaced or
// patched by id over RPC, answered by authenticate and whoami, never listed or logged, gone
// with the row on every ending; one round trip and one row written per update.

afterEach(() => {
  vi.useRealTimers();
});

const DATA = { tenant: "acme", roles: ["admin", "billing"], prefs: { theme: "dark", lang: "de" } };

/** The RPC entrypoint over counting bindings: round trips, statements and rows written. */
function countedService(vars: Partial<Env> = {}) {
  const counter = countingShards(databases());
  return { service: new SessionService(createExecutionContext(), { ...env, ...counter.env, ...vars }), counter };
}

/** A rejected RPC call's error as `Name: message`; caught here, as the pool reports rejections handed to `expect().rejects`. */
async function refusal(rpc: () => Promise<unknown>): Promise<string> {
  try {
    await rpc();
  } catch (error) {
    return String(error);
  }
  return "no error";
}

/** The session's `data` column as stored, or "no row". */
async function storedData(userId: string, sessionId: string): Promise<unknown> {
  const row = await (await d1OfUser(userId))
    .prepare("SELECT data FROM sessions WHERE id = ?")
    .bind(sessionId)
    .first<{ data: string | null }>();
  return row ? row.data : "no row";
}

async function dataOf(token: string) {
  const session = await exports.SessionService.authenticate(token);
  return session && (session.data ?? "none");
}

const update = (input: unknown) =>
  exports.SessionService.updateSessionData(input as Parameters<typeof exports.SessionService.updateSessionData>[0]);

describe("application data: set at create, answered with the session", () => {
  it("authenticate and whoami answer it exactly; a session without data answers none", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.UTC(2026, 10, 27, 9, 0, 0));
    const userId = newUser();
    const session = await exports.SessionService.create({ userId, userAgent: CHROME_MAC, data: DATA });
    const plain = await issue(userId);
    expect(await exports.SessionService.authenticate(session.token)).toEqual({
      sessionId: session.id,
      userId,
      expiresAt: session.expiresAt,
      authenticatedAt: "2026-11-27T09:00:00.000Z",
      factors: [],
      assuranceLevel: null,
      organization: null,
      data: DATA,
    });
    expect(await exports.SessionService.authenticate(plain.token)).not.toHaveProperty("data");
    const whoami = await call("GET", "/auth/whoami", bearer(session.token));
    expect(await whoami.json()).toEqual({
      session_id: session.id,
      user_id: userId,
      expires_at: session.expiresAt,
      authenticated_at: "2026-11-27T09:00:00.000Z",
      amr: [],
      assurance_level: null,
      organization: null,
      device_bound: false,
      data: DATA,
    });
    expect(await (await call("GET", "/auth/whoami", bearer(plain.token))).json()).not.toHaveProperty("data");
    // Stored as its JSON text, nothing else; `{}` is none.
    expect(await storedData(userId, session.id)).toBe(JSON.stringify(DATA));
    const empty = await exports.SessionService.create({ userId, data: {} });
    expect([await storedData(userId, empty.id), await dataOf(empty.token)]).toEqual([null, "none"]);
  });

  it("never in the user's list, by token or by RPC, nor in the security log", async () => {
    const userId = newUser();
    const marker = "marker-4f1c2e";
    const session = await exports.SessionService.create({ userId, userAgent: CHROME_MAC, data: { marker } });
    await update({ sessionId: session.id, data: { marker, more: marker }, mode: "merge" });
    for (const path of ["/auth/sessions", "/auth/events"]) {
      const response = await call("GET", path, bearer(session.token));
      expect(response.status).toBe(200);
      expect(await response.text()).not.toContain(marker);
    }
    expect(JSON.stringify(await exports.SessionService.listUserSessions(userId))).not.toContain(marker);
    expect(JSON.stringify(await tableSnapshot("session_events"))).not.toContain(marker);
  });

  it("support access takes data too, answered the same", async () => {
    const userId = newUser();
    await issue(userId);
    const support = await exports.SessionService.openSupportSession({
      userId,
      agentId: "agent-ada",
      reason: "Ticket 4711",
      data: { tenant: "acme" },
    });
    expect(await exports.SessionService.authenticate(support.token)).toMatchObject({
      actor: { sub: "agent-ada", reason: "Ticket 4711" },
      data: { tenant: "acme" },
    });
  });
});

describe("updateSessionData: replace or merge (RFC 7396), by id", () => {
  it("replace swaps the whole object; {} clears it", async () => {
    const session = await exports.SessionService.create({ userId: newUser(), data: DATA });
    expect(await update({ sessionId: session.id, data: { tenant: "globex" } })).toEqual({ updated: true });
    expect(await dataOf(session.token)).toEqual({ tenant: "globex" });
    expect(await update({ sessionId: session.id, data: { tenant: "initech" }, mode: "replace" })).toEqual({
      updated: true,
    });
    expect(await dataOf(session.token)).toEqual({ tenant: "initech" });
    expect(await update({ sessionId: session.id, data: {} })).toEqual({ updated: true });
    expect(await dataOf(session.token)).toBe("none");
  });

  it("merge sets keys, deletes those given null, merges objects at every depth, and leaves none when emptied", async () => {
    const userId = newUser();
    const session = await exports.SessionService.create({ userId, data: DATA });
    const merge = (data: object) => update({ sessionId: session.id, data, mode: "merge" });
    expect(
      await merge({ tenant: "globex", roles: null, prefs: { lang: null, tz: "Europe/Berlin" }, seats: 5 }),
    ).toEqual({ updated: true });
    expect(await dataOf(session.token)).toEqual({
      tenant: "globex",
      prefs: { theme: "dark", tz: "Europe/Berlin" },
      seats: 5,
    });
    // An array is replaced whole, never merged.
    await merge({ tags: ["a", "b"] });
    await merge({ tags: ["c"] });
    expect(await dataOf(session.token)).toMatchObject({ tags: ["c"] });
    await merge({ tenant: null, prefs: null, seats: null, tags: null });
    expect([await dataOf(session.token), await storedData(userId, session.id)]).toEqual(["none", null]);
    // Onto a session without data.
    const plain = await issue(userId);
    expect(await update({ sessionId: plain.id, data: { tenant: "acme", gone: null }, mode: "merge" })).toEqual({
      updated: true,
    });
    expect(await dataOf(plain.token)).toEqual({ tenant: "acme" });
  });

  it("one round trip to the user's database, two statements, one row written", async () => {
    const userId = newUser();
    const session = await exports.SessionService.create({ userId, data: DATA });
    for (const mode of ["replace", "merge"] as const) {
      const { service, counter } = countedService();
      expect(await service.updateSessionData({ sessionId: session.id, data: { seats: 7 }, mode })).toEqual({
        updated: true,
      });
      expect({
        roundTrips: counter.roundTrips(),
        statements: counter.statements(),
        rows: counter.rowsWritten(),
      }).toEqual({ roundTrips: { [await bindingOfUser(userId)]: 1 }, statements: 2, rows: 1 });
    }
    expect(await dataOf(session.token)).toEqual({ seats: 7 });
  });

  it("safe across the service's own retry: the first attempt committed, its answer lost, the replay answers the same", async () => {
    const userId = newUser();
    const session = await exports.SessionService.create({ userId, data: { seats: 1, plan: "free" } });
    const binding = await bindingOfUser(userId);
    const faulty = faultyD1(await d1OfUser(userId), ["after"]);
    const service = new SessionService(createExecutionContext(), { ...env, [binding]: faulty.db });
    expect(
      await service.updateSessionData({ sessionId: session.id, data: { plan: null, seats: 2 }, mode: "merge" }),
    ).toEqual({ updated: true });
    expect(faulty.roundTrips).toBe(2);
    expect(await dataOf(session.token)).toEqual({ seats: 2 });
  });

  it("no live session by that id: updated false, nothing written, no round trip for an id of no database", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 27, 9, 0, 0);
    vi.setSystemTime(start);
    const userId = newUser();
    const expiring = await exports.SessionService.create({ userId, ttlSeconds: 60, data: { a: 1 } });
    const unknown = `${expiring.id.slice(0, 2)}${"A".repeat(22)}`;
    vi.setSystemTime(start + 61_000);
    const before = await tableSnapshot();
    for (const sessionId of [expiring.id, unknown]) {
      const { service, counter } = countedService();
      expect(await service.updateSessionData({ sessionId, data: { a: 2 } })).toEqual({ updated: false });
      expect({ roundTrips: counter.roundTrips(), rows: counter.rowsWritten() }).toEqual({
        roundTrips: { [await bindingOfUser(userId)]: 1 },
        rows: 0,
      });
    }
    const { service, counter } = countedService();
    expect(await service.updateSessionData({ sessionId: "short", data: { a: 2 } })).toEqual({ updated: false });
    expect(counter.roundTrips()).toEqual({});
    expect(await tableSnapshot()).toEqual(before);
  });
});

describe("bad input: a clear TypeError or RangeError, nothing written", () => {
  // 8 bytes of `{"k":""}` around the string.
  const ofBytes = (bytes: number, char = "x") => ({
    k: char.repeat((bytes - 8) / new TextEncoder().encode(char).length),
  });
  const nested = (depth: number): SessionData => (depth === 1 ? { leaf: true } : { a: nested(depth - 1) as never });

  it("2048 bytes of JSON (UTF-8) are the most, counted in bytes, not characters; 8 levels the deepest", async () => {
    const userId = newUser();
    for (const data of [ofBytes(2048), ofBytes(2048, "é"), ofBytes(2048, "😀"), nested(8)]) {
      const session = await exports.SessionService.create({ userId, data });
      expect(await dataOf(session.token)).toEqual(data);
      expect(await update({ sessionId: session.id, data })).toEqual({ updated: true });
    }
  });

  it("refused by create and by both modes of updateSessionData, before any round trip", async () => {
    const userId = newUser();
    const session = await exports.SessionService.create({ userId, data: { a: 1 } });
    const deep = nested(9);
    const cases: [unknown, string][] = [
      [ofBytes(2049), "RangeError: data must be at most 2048 bytes of JSON (UTF-8); it is 2049"],
      [ofBytes(2050, "é"), "RangeError: data must be at most 2048 bytes of JSON (UTF-8); it is 2050"],
      [["admin"], "TypeError: data must be a JSON object (not an array), at most 2048 bytes"],
      ["acme", "TypeError: data must be a JSON object (not a string), at most 2048 bytes"],
      [42, "TypeError: data must be a JSON object (not a number), at most 2048 bytes"],
      [null, "TypeError: data must be a JSON object (not null), at most 2048 bytes"],
      [new Date(0), "TypeError: data must be a JSON object (not a Date), at most 2048 bytes"],
      [new Map([["a", 1]]), "TypeError: data must be a JSON object (not a Map), at most 2048 bytes"],
      [deep, "RangeError: data may nest objects and arrays at most 8 deep: data.a.a.a.a.a.a.a.a is deeper"],
      [
        { list: [[[[[[[[1]]]]]]]] },
        "RangeError: data may nest objects and arrays at most 8 deep: data.list[0][0][0][0][0][0][0] is deeper",
      ],
      [
        { at: new Date(0) },
        "TypeError: data must hold only JSON values (null, booleans, finite numbers, strings, arrays, objects): data.at is not one",
      ],
      [
        { n: Number.NaN },
        "TypeError: data must hold only JSON values (null, booleans, finite numbers, strings, arrays, objects): data.n is not one",
      ],
      [
        { big: 1n },
        "TypeError: data must hold only JSON values (null, booleans, finite numbers, strings, arrays, objects): data.big is not one",
      ],
      [
        { a: [1, undefined] },
        "TypeError: data must hold only JSON values (null, booleans, finite numbers, strings, arrays, objects): data.a[1] is not one",
      ],
    ];
    const before = await tableSnapshot();
    for (const [data, message] of cases) {
      const { service, counter } = countedService();
      expect({ data, error: await refusal(() => service.create({ userId, data: data as never })) }).toEqual({
        data,
        error: message,
      });
      for (const mode of ["replace", "merge"] as const)
        expect({
          data,
          mode,
          error: await refusal(() => service.updateSessionData({ sessionId: session.id, data: data as never, mode })),
        }).toEqual({
          data,
          mode,
          error: message,
        });
      expect(counter.roundTrips()).toEqual({});
    }
    // Missing data, a mode or an id that is not one.
    const { service, counter } = countedService();
    expect(await refusal(() => service.updateSessionData({ sessionId: session.id } as never))).toBe(
      "TypeError: data must be a JSON object (not undefined), at most 2048 bytes",
    );
    expect(
      await refusal(() => service.updateSessionData({ sessionId: session.id, data: {}, mode: "patch" as never })),
    ).toBe("TypeError: mode must be one of replace, merge");
    expect(await refusal(() => service.updateSessionData({ sessionId: 7 as never, data: {} }))).toBe(
      "TypeError: sessionId must be a string",
    );
    expect(await refusal(() => service.updateSessionData(undefined as never))).toBe(
      "TypeError: sessionId must be a string",
    );
    expect(counter.roundTrips()).toEqual({});
    expect(await tableSnapshot()).toEqual(before);
    expect(await dataOf(session.token)).toEqual({ a: 1 });
  });

  it("a merge whose result would pass 2048 bytes: a RangeError after its one round trip, nothing written", async () => {
    const userId = newUser();
    // 1008 bytes: 500 two-byte characters.
    const session = await exports.SessionService.create({ userId, data: { a: "é".repeat(500) } });
    const stored = await storedData(userId, session.id);
    const merge = (n: number) => () =>
      countedService().service.updateSessionData({ sessionId: session.id, data: { b: "x".repeat(n) }, mode: "merge" });
    // 1008 + `,"b":""` (7) + 1034 = 2049: over, by bytes (by characters it would be 1549).
    const { service, counter } = countedService();
    expect(
      await refusal(() =>
        service.updateSessionData({ sessionId: session.id, data: { b: "x".repeat(1034) }, mode: "merge" }),
      ),
    ).toBe("RangeError: data merged into the session's would be 2049 bytes of JSON, over 2048: nothing was written");
    expect({ roundTrips: counter.roundTrips(), rows: counter.rowsWritten() }).toEqual({
      roundTrips: { [await bindingOfUser(userId)]: 1 },
      rows: 0,
    });
    expect(await storedData(userId, session.id)).toBe(stored);
    // 2048 exactly: written.
    expect(await merge(1033)()).toEqual({ updated: true });
    expect(await dataOf(session.token)).toEqual({ a: "é".repeat(500), b: "x".repeat(1033) });
  });
});

describe("gone with the session on every ending", () => {
  it("logout, logout everywhere or of others, delete, endSession, endUserSessions, eviction: the row and its data are gone", async () => {
    const userId = newUser();
    const withData = () => exports.SessionService.create({ userId, userAgent: CHROME_MAC, data: { tenant: "acme" } });
    const ended: { id: string; token: string }[] = [];
    const keeper = await withData();

    const loggedOut = await withData();
    expect((await call("POST", "/auth/logout", sessionCookie(loggedOut.token))).status).toBe(200);
    ended.push(loggedOut);

    const deleted = await withData();
    expect((await call("DELETE", `/auth/sessions/${deleted.id}`, bearer(keeper.token))).status).toBe(200);
    ended.push(deleted);

    const byId = await withData();
    expect(await exports.SessionService.endSession({ sessionId: byId.id, reason: "admin" })).toEqual({ ended: true });
    ended.push(byId);

    const other = await withData();
    expect((await call("DELETE", "/auth/logout?scope=others", bearer(keeper.token))).status).toBe(200);
    ended.push(other);

    const byUser = await withData();
    expect(
      await exports.SessionService.endUserSessions({ userId, exceptSessionId: keeper.id, reason: "password_changed" }),
    ).toEqual({ ended: 1 });
    ended.push(byUser);

    // Past SESSION_MAX_PER_USER, the least recently active go (the keeper, here) with theirs.
    const evicting = new SessionService(createExecutionContext(), { ...env, SESSION_MAX_PER_USER: "1" });
    const last = await evicting.create({ userId, data: { tenant: "acme" } });
    ended.push(keeper);

    expect((await call("DELETE", "/auth/logout", bearer(last.token))).status).toBe(200);
    ended.push(last);

    for (const session of ended) {
      expect({
        id: session.id,
        row: await storedData(userId, session.id),
        authenticated: await exports.SessionService.authenticate(session.token),
        updated: await update({ sessionId: session.id, data: { tenant: "x" }, mode: "merge" }),
      }).toEqual({ id: session.id, row: "no row", authenticated: null, updated: { updated: false } });
    }
    const whoami = await callWith({}, "GET", "/auth/whoami", bearer(last.token));
    expect(whoami.status).toBe(401);
  });

  it("the system's endings too: a context change under end, an inbound SET, an agent's support access ended, expiry and the purge", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    const data = { tenant: "acme" };
    const gone = async (userId: string, session: { id: string; token: string }) => ({
      row: await storedData(userId, session.id),
      authenticated: await exports.SessionService.authenticate(session.token),
      updated: await update({ sessionId: session.id, data, mode: "merge" }),
    });
    const GONE = { row: "no row", authenticated: null, updated: { updated: false } };

    const copied = newUser();
    const browser = await exports.SessionService.create({
      userId: copied,
      userAgent: CHROME_MAC,
      carrier: "cookie",
      data,
    });
    const elsewhere = { ...sessionCookie(browser.token), "User-Agent": FIREFOX_WINDOWS };
    const response = await callWith({ SESSION_CONTEXT_DEVICE: "end" }, "GET", "/auth/sessions", elsewhere);
    expect(response.status).toBe(401);
    expect(await gone(copied, browser)).toEqual(GONE);

    const disabled = newUser();
    const session = await exports.SessionService.create({ userId: disabled, data });
    const idp = await standInUpstream();
    expect((await idp.push(await idp.setAbout(disabled))).status).toBe(202);
    expect(await gone(disabled, session)).toEqual(GONE);

    const helped = newUser();
    await issue(helped);
    const agentId = `agent-${crypto.randomUUID()}`;
    const support = await exports.SessionService.openSupportSession({ userId: helped, agentId, reason: "T-1", data });
    expect(await exports.SessionService.endSupportSessions({ agentId, reason: "agent_left" })).toEqual({
      ended: 1,
      moving: 0,
    });
    expect(await gone(helped, support)).toEqual(GONE);

    const expiring = newUser();
    const short = await exports.SessionService.create({ userId: expiring, ttlSeconds: 60, data });
    vi.setSystemTime(start + 61_000);
    // Expired: unreadable and not updated at once; the row, data and all, goes with the next purge.
    expect(await gone(expiring, short)).toEqual({ ...GONE, row: JSON.stringify(data) });
    await purge(env);
    expect(await gone(expiring, short)).toEqual(GONE);
  });
});
