import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { readConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/queries.ts";
import { issueSession } from "../src/issue-session.ts";
import { endOneSession, endSessionsOfUser, listSessionsOfUser } from "../src/user-sessions.ts";
import { countingD1 } from "./d1.ts";
import { bearer, callWith, type Issued, issue, newUser, sessionCookie } from "./helpers.ts";

// Each operation authenticates and acts in one D1 round trip, whatever the number of
// sessions: asserted by counting calls on a wrapped D1 binding.

async function roundTrips(method: string, path: string, headers: Record<string, string>) {
  const counter = countingD1(env.DB);
  const response = await callWith({ DB: counter.db }, method, path, headers);
  return { status: response.status, roundTrips: counter.roundTrips };
}

async function userWith(count: number) {
  const user = newUser();
  const sessions = [];
  for (let i = 0; i < count; i++) sessions.push(await issue(user));
  return sessions as [Awaited<ReturnType<typeof issue>>, ...Awaited<ReturnType<typeof issue>>[]];
}

describe("round trips per request", () => {
  for (const count of [1, 25]) {
    it(`with ${count} session(s) per user, every operation costs exactly one`, async () => {
      const [current, ...others] = await userWith(count);
      expect(await roundTrips("GET", "/auth/sessions", bearer(current.token))).toEqual({ status: 200, roundTrips: 1 });
      expect(await roundTrips("GET", "/auth/events", bearer(current.token))).toEqual({ status: 200, roundTrips: 1 });
      if (others[0]) {
        expect(await roundTrips("DELETE", `/auth/sessions/${others[0].id}`, bearer(current.token))).toEqual({
          status: 200,
          roundTrips: 1,
        });
      }
      expect(await roundTrips("DELETE", "/auth/logout?scope=others", bearer(current.token))).toEqual({
        status: 200,
        roundTrips: 1,
      });
      const [everywhere] = await userWith(count);
      expect(await roundTrips("DELETE", "/auth/logout", bearer(everywhere.token))).toEqual({
        status: 200,
        roundTrips: 1,
      });

      const [single] = await userWith(count);
      expect(await roundTrips("POST", "/auth/logout", sessionCookie(single.token))).toEqual({
        status: 200,
        roundTrips: 1,
      });
      expect(await roundTrips("DELETE", `/auth/sessions/${single.id}`, bearer(single.token))).toEqual({
        status: 401,
        roundTrips: 1,
      });
    });
  }

  it("refusals that need no lookup cost none; those that do cost one", async () => {
    const [session] = await userWith(1);
    const cases: [string, string, Record<string, string>, number, number][] = [
      ["GET", "/auth/sessions", {}, 401, 0],
      ["GET", "/auth/sessions", { Authorization: "Basic x" }, 401, 0],
      ["POST", "/auth/logout", {}, 401, 0],
      ["POST", "/auth/logout", { ...sessionCookie(session.token), "Sec-Fetch-Site": "cross-site" }, 403, 0],
      ["DELETE", "/auth/logout", { Authorization: `Bearer ${"A".repeat(8192)}` }, 400, 0],
      ["GET", "/auth/logout", bearer(session.token), 405, 0],
      ["GET", "/nowhere", bearer(session.token), 404, 0],
      ["DELETE", "/auth/logout?scope=all", bearer(session.token), 400, 0],
      ["DELETE", "/auth/sessions/", bearer(session.token), 400, 1],
      ["DELETE", `/auth/sessions/${"A".repeat(9000)}`, bearer(session.token), 414, 0],
      ["DELETE", `/auth/sessions/${"A".repeat(5000)}`, bearer(session.token), 401, 1],
      ["DELETE", `/auth/sessions/${"A".repeat(1100)}`, { Authorization: "Bearer x" }, 401, 0],
      ["DELETE", "/auth/logout", bearer(`${"A".repeat(22)}.${"B".repeat(43)}`), 401, 1],
    ];
    for (const [method, path, headers, status, expected] of cases) {
      expect({ method, path, ...(await roundTrips(method, path, headers)) }).toEqual({
        method,
        path,
        status,
        roundTrips: expected,
      });
    }
  });

  it("the counter itself counts: two sequential statements are two", async () => {
    const counter = countingD1(env.DB);
    await counter.db.prepare("SELECT 1").first();
    await counter.db.prepare("SELECT ?").bind(2).all();
    await counter.db.batch([counter.db.prepare("SELECT 1"), counter.db.prepare("SELECT 2")]);
    expect(counter.roundTrips).toBe(3);
  });
});

// The RPC methods, through the code they share with the operator commands (src/user-sessions.ts,
// src/issue-session.ts), on a counting binding.
describe("round trips of the RPC operations", () => {
  for (const count of [1, 25]) {
    it(`with ${count} session(s) per user, each costs exactly one`, async () => {
      const config = readConfig(env);
      const userId = newUser();
      const sessions: Issued[] = [];
      for (let i = 0; i < count; i++) sessions.push(await issue(userId));
      const measure = async (run: (db: ReturnType<typeof openDatabase>) => Promise<unknown>) => {
        const counter = countingD1(env.DB);
        await run(openDatabase(counter.db));
        return counter.roundTrips;
      };
      expect(await measure((db) => issueSession(db, config, { userId }))).toBe(1);
      expect(await measure((db) => listSessionsOfUser(db, config, userId))).toBe(1);
      expect(
        await measure((db) => endOneSession(db, config, { sessionId: sessions[0]!.id, reason: "admin" }, null)),
      ).toBe(1);
      expect(
        await measure((db) =>
          endSessionsOfUser(db, config, { userId, exceptSessionId: sessions[0]!.id, reason: "admin" }, null),
        ),
      ).toBe(1);
      expect(await measure((db) => endOneSession(db, config, { sessionId: "short", reason: "admin" }, null))).toBe(0);
    });
  }
});
