import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/client.ts";
import { bucketOf, openShards, readShardMap, type Shards } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { issueSession } from "../src/services/issue-session.ts";
import { type MoveStep, moveBuckets } from "../src/services/moves.ts";
import { purge } from "../src/services/purge.ts";
import { updateSessionData } from "../src/services/session-data.ts";
import {
  endSession as endOneSession,
  endUserSessions as endSessionsOfUser,
  listUserSessions as listSessionsOfUser,
} from "../src/services/user-sessions.ts";
import { countingD1, countingShards } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  callWith,
  d1,
  databases,
  type Issued,
  isLive,
  issue,
  newUser,
  newUserOn,
  scopeWith,
  sessionCookie,
  shardBindings,
} from "./helpers.ts";
import { newOrganization } from "./organization-fixtures.ts";
import { accessTokenVars } from "./ssf.ts";

// Each operation authenticates and acts in one D1 round trip, to the one database that
// holds the caller's user, whatever the number of sessions or databases: asserted by
// counting calls on every D1 binding. The suite runs at one database and at four.

async function roundTrips(method: string, path: string, headers: Record<string, string>, vars: Partial<Env> = {}) {
  const counter = countingShards(databases());
  const response = await callWith({ ...vars, ...counter.env }, method, path, headers);
  return { status: response.status, roundTrips: counter.roundTrips() };
}

async function userWith(count: number, user = newUser()) {
  const sessions = [];
  for (let i = 0; i < count; i++) sessions.push(await issue(user));
  return sessions as [Awaited<ReturnType<typeof issue>>, ...Awaited<ReturnType<typeof issue>>[]];
}

/** One round trip to the database of an upstream's link (its `<upstream>\n<subject>` hashes as a user id does), then one to the user's. */
async function linkThenUser(link: string, user: string): Promise<Record<string, number>> {
  const trips: Record<string, number> = {};
  for (const binding of [await bindingOfUser(link), await bindingOfUser(user)])
    trips[binding] = (trips[binding] ?? 0) + 1;
  return trips;
}

/** The SessionService entrypoint over counting bindings. */
function countedService() {
  const counter = countingShards(databases());
  return { service: new SessionService(createExecutionContext(), { ...env, ...counter.env }), counter };
}

const WELL_FORMED_UNKNOWN = `${"A".repeat(24)}.${"B".repeat(43)}`; // bucket 0, default region

describe("round trips per request, per database", () => {
  for (const count of [1, 25]) {
    it(`with ${count} session(s) per user, every operation costs exactly one, on the user's database`, async () => {
      const user = newUser();
      const own = { [await bindingOfUser(user)]: 1 };
      const [current, ...others] = await userWith(count, user);
      const one = (status: number) => ({ status, roundTrips: own });
      expect(await roundTrips("GET", "/auth/sessions", bearer(current.token))).toEqual(one(200));
      expect(await roundTrips("GET", "/auth/events", bearer(current.token))).toEqual(one(200));
      expect(await roundTrips("GET", "/auth/whoami", bearer(current.token))).toEqual(one(200));
      const tokens = await accessTokenVars();
      expect(await roundTrips("POST", "/auth/token", bearer(current.token), tokens)).toEqual(one(200));
      expect(await roundTrips("POST", "/auth/token", sessionCookie(current.token), tokens)).toEqual(one(200));
      if (others[0]) {
        expect(await roundTrips("DELETE", `/auth/sessions/${others[0].id}`, bearer(current.token))).toEqual(one(200));
      }
      expect(await roundTrips("DELETE", "/auth/logout?scope=others", bearer(current.token))).toEqual(one(200));
      const [everywhere] = await userWith(count, user);
      expect(await roundTrips("DELETE", "/auth/logout", bearer(everywhere.token))).toEqual(one(200));

      // By cookie, as a browser calls them (a device-bound one can no other way).
      const byCookie = await issue(user);
      const other = await issue(user);
      expect(await roundTrips("GET", "/auth/sessions", sessionCookie(byCookie.token))).toEqual(one(200));
      expect(await roundTrips("GET", "/auth/events", sessionCookie(byCookie.token))).toEqual(one(200));
      expect(await roundTrips("GET", "/auth/whoami", sessionCookie(byCookie.token))).toEqual(one(200));
      expect(await roundTrips("DELETE", `/auth/sessions/${other.id}`, sessionCookie(byCookie.token))).toEqual(one(200));
      const [single] = await userWith(count, user);
      expect(await roundTrips("POST", "/auth/logout", sessionCookie(single.token))).toEqual(one(200));
      expect(await roundTrips("DELETE", `/auth/sessions/${single.id}`, bearer(single.token))).toEqual(one(401));
    });
  }

  it("deleting another user's session in another database: one trip, to the caller's database only", async () => {
    const bindings = shardBindings();
    const callerBinding = bindings[0] as string;
    const otherBinding = bindings.at(-1) as string;
    const [caller] = await userWith(1, await newUserOn(callerBinding));
    const [victim] = await userWith(1, await newUserOn(otherBinding));
    expect(await roundTrips("DELETE", `/auth/sessions/${victim.id}`, bearer(caller.token))).toEqual({
      status: 401,
      roundTrips: { [callerBinding]: 1 },
    });
    expect(await isLive(victim.token)).toBe(true);
    // An id of a region this deployment does not have: the same answer, the same one trip.
    expect(await roundTrips("DELETE", `/auth/sessions/xx${"A".repeat(24)}`, bearer(caller.token))).toEqual({
      status: 401,
      roundTrips: { [callerBinding]: 1 },
    });
    // A dead caller learns nothing about the id either: 401 invalid_token, same one trip.
    expect(await roundTrips("DELETE", `/auth/sessions/${victim.id}`, bearer(WELL_FORMED_UNKNOWN))).toEqual({
      status: 401,
      roundTrips: { [bindings[0] as string]: 1 },
    });
  });

  it("SessionService: create and authenticate cost one round trip each, on the user's database", async () => {
    const user = newUser();
    const own = { [await bindingOfUser(user)]: 1 };
    const created = countedService();
    const session = await created.service.create({ userId: user });
    expect(created.counter.roundTrips()).toEqual(own);
    const checked = countedService();
    expect(await checked.service.authenticate(session.token)).toMatchObject({ userId: user });
    expect(checked.counter.roundTrips()).toEqual(own);
    const refused = countedService();
    expect(await refused.service.authenticate("not a token")).toBeNull();
    expect(refused.counter.roundTrips()).toEqual({});
  });

  it("a member's session: its create reads its organization's policy first, one more trip there; each request, one", async () => {
    const user = newUser();
    const binding = await bindingOfUser(user);
    const organizationId = await newOrganization();
    const created = countedService();
    const session = await created.service.create({ userId: user, organization: organizationId });
    expect(created.counter.roundTrips()).toEqual({ [binding]: 2 });
    const checked = countedService();
    expect(await checked.service.authenticate(session.token)).toMatchObject({ userId: user });
    expect(checked.counter.roundTrips()).toEqual({ [binding]: 1 });
    for (const path of ["/auth/sessions", "/auth/events", "/auth/whoami"])
      expect(await roundTrips("GET", path, bearer(session.token))).toEqual({
        status: 200,
        roundTrips: { [binding]: 1 },
      });
  });

  it("the purge asks every database, and nothing else, when nothing is dead", async () => {
    const counter = countingShards(databases());
    const result = await purge({ ...env, ...counter.env });
    expect(result).toMatchObject({ sessions: 0, events: 0, receivedSets: 0, complete: true });
    // One per table it purges: sessions, session_events, ssf_received_sets.
    expect(counter.roundTrips()).toEqual(Object.fromEntries(shardBindings().map((binding) => [binding, 3])));
  });

  it("refusals that need no lookup cost none; those that do cost one", async () => {
    const user = newUser();
    const [session] = await userWith(1, user);
    const own = { [await bindingOfUser(user)]: 1 };
    const bucketZero = { [shardBindings()[0] as string]: 1 };
    const cases: [string, string, Record<string, string>, number, Record<string, number>][] = [
      ["GET", "/auth/sessions", {}, 401, {}],
      ["GET", "/auth/sessions", { Authorization: "Basic x" }, 401, {}],
      ["POST", "/auth/logout", {}, 401, {}],
      ["POST", "/auth/logout", { ...sessionCookie(session.token), "Sec-Fetch-Site": "cross-site" }, 403, {}],
      ["GET", "/auth/sessions", { ...sessionCookie(session.token), "Sec-Fetch-Site": "cross-site" }, 403, {}],
      ["GET", "/auth/sessions", sessionCookie("garbage"), 401, {}],
      ["GET", "/auth/events", sessionCookie(WELL_FORMED_UNKNOWN), 401, bucketZero],
      ["DELETE", "/auth/logout", { Authorization: `Bearer ${"A".repeat(8192)}` }, 400, {}],
      ["GET", "/auth/logout", bearer(session.token), 405, {}],
      ["GET", "/nowhere", bearer(session.token), 404, {}],
      // An unknown scope is refused once the token is proven live (a dead one gets the contract's 401).
      ["DELETE", "/auth/logout?scope=all", bearer(session.token), 400, own],
      ["DELETE", "/auth/logout?scope=all", bearer(WELL_FORMED_UNKNOWN), 401, bucketZero],
      ["DELETE", "/auth/sessions/", bearer(session.token), 400, own],
      ["DELETE", `/auth/sessions/${"A".repeat(9000)}`, bearer(session.token), 414, {}],
      ["DELETE", `/auth/sessions/${"A".repeat(5000)}`, bearer(session.token), 401, own],
      ["DELETE", `/auth/sessions/${"A".repeat(1100)}`, { Authorization: "Bearer x" }, 401, {}],
      ["DELETE", "/auth/logout", bearer(WELL_FORMED_UNKNOWN), 401, bucketZero],
      // A token of a region this deployment does not have cannot be one of its tokens.
      ["DELETE", "/auth/logout", bearer(`xx${WELL_FORMED_UNKNOWN}`), 400, {}],
      // An id without a bucket names no database either.
      ["DELETE", "/auth/logout", bearer(`${"A".repeat(22)}.${"B".repeat(43)}`), 400, {}],
    ];
    for (const [method, path, headers, status, expected] of cases)
      expect({ method, path, ...(await roundTrips(method, path, headers)) }).toEqual({
        method,
        path,
        status,
        roundTrips: expected,
      });
  });

  it("a SET naming this service's user id (subjects_are_user_ids) costs one, on its user's database; a refused one none", async () => {
    const user = newUser();
    await userWith(2, user);
    const { publicKey, privateKey } = await generateKeyPair("ES256");
    const upstream = {
      issuer: "https://idp.example",
      name: "idp",
      audience: "sessions",
      subject: "opaque",
      subjects_are_user_ids: true,
    };
    const keys = [{ ...(await exportJWK(publicKey)), kid: "k" }];
    const set = (kid: string) =>
      new SignJWT({
        ...{ iss: upstream.issuer, aud: upstream.audience, jti: crypto.randomUUID() },
        iat: Math.floor(Date.now() / 1000),
        sub_id: { format: "opaque", id: user },
        events: { "https://schemas.openid.net/secevent/risc/event-type/account-disabled": {} },
      })
        .setProtectedHeader({ alg: "ES256", typ: "secevent+jwt", kid })
        .sign(privateKey);
    for (const [kid, status, expected] of [
      ["k", 202, { [await bindingOfUser(user)]: 1 }],
      ["unknown", 400, {}],
    ] as const) {
      const counter = countingShards(databases());
      const bindings = { ...counter.env, SSF_UPSTREAMS: JSON.stringify([{ ...upstream, jwks: { keys } }]) };
      const headers = { "Content-Type": "application/secevent+jwt" };
      const response = await callWith(bindings, "POST", "/ssf/inbound", headers, await set(kid));
      expect({ status: response.status, roundTrips: counter.roundTrips() }).toEqual({ status, roundTrips: expected });
    }
  });

  it("a SET that holds sessions (CAEP credential-change) by the provider's subject costs the link's read, then one on its user's database", async () => {
    const user = newUser();
    const { publicKey, privateKey } = await generateKeyPair("ES256");
    const upstream = { issuer: "https://idp.example", name: "idp", audience: "sessions", subject: "opaque" };
    const keys = [{ ...(await exportJWK(publicKey)), kid: "k" }];
    const vars = { SSF_UPSTREAMS: JSON.stringify([{ ...upstream, jwks: { keys } }]) };
    const service = new SessionService(createExecutionContext(), { ...env, ...vars });
    const signIn = () => service.create({ userId: user, upstream: { provider: "idp", subject: "s" } });
    const sessions = [await signIn(), await signIn()];
    const set = await new SignJWT({
      ...{ iss: upstream.issuer, aud: upstream.audience, jti: crypto.randomUUID() },
      iat: Math.floor(Date.now() / 1000),
      sub_id: { format: "opaque", id: "s" },
      events: { "https://schemas.openid.net/secevent/caep/event-type/credential-change": {} },
    })
      .setProtectedHeader({ alg: "ES256", typ: "secevent+jwt", kid: "k" })
      .sign(privateKey);
    const counter = countingShards(databases());
    const headers = { "Content-Type": "application/secevent+jwt" };
    const response = await callWith({ ...counter.env, ...vars }, "POST", "/ssf/inbound", headers, set);
    expect({ status: response.status, roundTrips: counter.roundTrips() }).toEqual({
      status: 202,
      roundTrips: await linkThenUser("idp\ns", user),
    });
    for (const session of sessions)
      expect(await service.authenticate(session.token)).toMatchObject({ reauthenticationRequired: true });
  });

  it("a SET naming the upstream's sid of one session costs the same two, and holds that one alone", async () => {
    const user = newUser();
    const { publicKey, privateKey } = await generateKeyPair("ES256");
    const upstream = { issuer: "https://idp.example", name: "idp", audience: "sessions", subject: "opaque" };
    const keys = [{ ...(await exportJWK(publicKey)), kid: "k" }];
    const vars = { SSF_UPSTREAMS: JSON.stringify([{ ...upstream, jwks: { keys } }]) };
    const service = new SessionService(createExecutionContext(), { ...env, ...vars });
    const signIn = (sid: string) => service.create({ userId: user, upstream: { provider: "idp", subject: "s", sid } });
    const [named, other] = [await signIn("sid-1"), await signIn("sid-2")];
    const set = await new SignJWT({
      ...{ iss: upstream.issuer, aud: upstream.audience, jti: crypto.randomUUID() },
      iat: Math.floor(Date.now() / 1000),
      sub_id: { format: "complex", user: { format: "opaque", id: "s" }, session: { format: "opaque", id: "sid-1" } },
      events: { "https://schemas.openid.net/secevent/caep/event-type/credential-change": {} },
    })
      .setProtectedHeader({ alg: "ES256", typ: "secevent+jwt", kid: "k" })
      .sign(privateKey);
    const counter = countingShards(databases());
    const headers = { "Content-Type": "application/secevent+jwt" };
    const response = await callWith({ ...counter.env, ...vars }, "POST", "/ssf/inbound", headers, set);
    expect({ status: response.status, roundTrips: counter.roundTrips() }).toEqual({
      status: 202,
      roundTrips: await linkThenUser("idp\ns", user),
    });
    expect(await service.authenticate(named.token)).toMatchObject({ reauthenticationRequired: true });
    expect(await service.authenticate(other.token)).toMatchObject({ sessionId: other.id });
    expect(await service.authenticate(other.token)).not.toHaveProperty("reauthenticationRequired");
  });

  it("the counter itself counts: two sequential statements are two", async () => {
    const counter = countingD1(databases()[shardBindings()[0] as string] as D1Database);
    await counter.db.prepare("SELECT 1").first();
    await counter.db.prepare("SELECT ?").bind(2).all();
    await counter.db.batch([counter.db.prepare("SELECT 1"), counter.db.prepare("SELECT 2")]);
    expect(counter.roundTrips).toBe(3);
  });
});

// The RPC methods, through the code they share with the operator commands (src/services/user-sessions.ts,
// src/services/issue-session.ts), on counting bindings: one round trip, to the user's database only.
describe("round trips of the RPC operations", () => {
  for (const count of [1, 25]) {
    it(`with ${count} session(s) per user, each costs exactly one, on the user's database`, async () => {
      const config = readConfig(env);
      const userId = newUser();
      const own = { [await bindingOfUser(userId)]: 1 };
      const sessions: Issued[] = [];
      for (let i = 0; i < count; i++) sessions.push(await issue(userId));
      const measure = async (run: (shards: Shards) => Promise<unknown>) => {
        const counter = countingShards(databases());
        await run(openShards({ ...env, ...counter.env }));
        return counter.roundTrips();
      };
      expect(await measure((shards) => issueSession(scopeWith(shards, config), { userId }))).toEqual(own);
      expect(await measure((shards) => listSessionsOfUser(scopeWith(shards, config), userId))).toEqual(own);
      expect(
        await measure((shards) =>
          updateSessionData(scopeWith(shards, config, null), {
            sessionId: sessions[0]!.id,
            data: { tenant: "acme" },
            mode: "merge",
          }),
        ),
      ).toEqual(own);
      expect(
        await measure((shards) =>
          endOneSession(scopeWith(shards, config, null), { sessionId: sessions[0]!.id, reason: "admin" }),
        ),
      ).toEqual(own);
      expect(
        await measure((shards) =>
          endSessionsOfUser(scopeWith(shards, config, null), {
            userId,
            exceptSessionId: sessions[0]!.id,
            reason: "admin",
          }),
        ),
      ).toEqual(own);
      expect(
        await measure((shards) =>
          endOneSession(scopeWith(shards, config, null), { sessionId: "short", reason: "admin" }),
        ),
      ).toEqual({});
    });
  }
});

// A bucket being moved (src/services/moves.ts): the move state rides in the same batch, so a
// frozen bucket still costs one; a moved one costs one more, on the database it went to,
// until SHARDS names that database.
describe.skipIf(shardBindings().length < 2)("round trips while a bucket moves", () => {
  const tools = (stopAfter?: MoveStep) => ({
    open: (binding: string) => openDatabase(d1(binding)),
    now: () => new Date(),
    afterStep: (_: number, step: MoveStep) => {
      if (step === stopAfter) throw new Error(`stopped after ${step}`);
    },
  });
  const plan = (bucket: number) => ({
    map: readShardMap(env),
    region: "default",
    first: bucket,
    last: bucket,
    to: "DB_1",
  });
  async function userIn(bucket: number) {
    for (;;) {
      const user = newUser();
      if ((await bucketOf(user)) === bucket) return user;
    }
  }

  it("frozen: a read costs one and answers; a write costs one and answers 503 moving", async () => {
    const [session] = await userWith(1, await userIn(500));
    await expect(moveBuckets(plan(500), tools("freeze"))).rejects.toThrow("stopped after freeze");
    expect(await roundTrips("GET", "/auth/sessions", bearer(session.token))).toEqual({
      status: 200,
      roundTrips: { DB: 1 },
    });
    expect(await roundTrips("DELETE", "/auth/logout", bearer(session.token))).toEqual({
      status: 503,
      roundTrips: { DB: 1 },
    });
  });

  it("moved: one on the old database and one on the new, until SHARDS names the new one", async () => {
    const user = await userIn(501);
    const [session] = await userWith(1, user);
    const { shards } = await moveBuckets(plan(501), tools());
    expect(await roundTrips("GET", "/auth/sessions", bearer(session.token))).toEqual({
      status: 200,
      roundTrips: { DB: 1, DB_1: 1 },
    });
    const forwarded = countedService();
    expect(await forwarded.service.authenticate(session.token)).toMatchObject({ userId: user });
    expect(forwarded.counter.roundTrips()).toEqual({ DB: 1, DB_1: 1 });
    const counter = countingShards(databases());
    const response = await callWith(
      { ...counter.env, SHARDS: shards },
      "DELETE",
      "/auth/logout",
      bearer(session.token),
    );
    expect({ status: response.status, roundTrips: counter.roundTrips() }).toEqual({
      status: 200,
      roundTrips: { DB_1: 1 },
    });
  });
});
