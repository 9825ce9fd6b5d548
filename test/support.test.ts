import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConfigError, readConfig } from "../src/domain/config.ts";
import { MAX_SUPPORT_REASON_LENGTH, SUPPORT_SESSIONS_PER_USER } from "../src/domain/support.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards } from "./d1.ts";
import { deviceKey, signProof } from "./device-keys.ts";
import {
  bearer,
  bindingOfUser,
  CLEARED_COOKIE,
  call,
  callWith,
  d1OfUser,
  databases,
  expectError,
  expectMessage,
  isLive,
  issue,
  newUser,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";

// Support access: a session opened on a user's behalf by an agent, with a reason, time-boxed,
// shown to the user, theirs to end, and refused everything that only the user may do.

afterEach(() => {
  vi.useRealTimers();
});

const AGENT = "agent-ada";
const REASON = "Ticket 4711: cannot see invoices";
const HOUR_MS = 3600 * 1000;

function open(userId: string, extra: Record<string, unknown> = {}) {
  return exports.SessionService.openSupportSession({ userId, agentId: AGENT, reason: REASON, ...extra });
}

/** The RPC's answer, or the error it threw as a string (the pool reports rejections handed to expect as unhandled). */
async function outcome(rpc: () => Promise<unknown>): Promise<unknown> {
  try {
    return await rpc();
  } catch (error) {
    return String(error);
  }
}

/** A user this service knows (signed in once), with the session they signed in with. */
async function knownUser() {
  const userId = newUser();
  const own = await issue(userId);
  return { userId, own };
}

async function eventsOf(userId: string) {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT type, session_id, support_agent, reason FROM session_events WHERE user_id = ? ORDER BY id")
    .bind(userId)
    .all<{ type: string; session_id: string; support_agent: string | null; reason: string | null }>();
  return results;
}

describe("opening support access", () => {
  it("answers a token that authenticates with the actor; the session lives SESSION_SUPPORT_MAX_SECONDS", async () => {
    const { userId } = await knownUser();
    const before = Date.now();
    const support = await open(userId);
    expect(Object.keys(support).sort()).toEqual(["cookie", "expiresAt", "id", "token"]);
    expect(support.token.startsWith(`${support.id}.`)).toBe(true);
    const expires = new Date(support.expiresAt).getTime();
    expect(expires).toBeGreaterThanOrEqual(before + HOUR_MS);
    expect(expires).toBeLessThanOrEqual(Date.now() + HOUR_MS);
    expect(support.cookie).toBe(
      `__Host-session=${support.token}; Max-Age=3600; Path=/; HttpOnly; Secure; SameSite=Lax`,
    );
    const caller = await exports.SessionService.authenticate(support.token);
    expect(caller).toMatchObject({ sessionId: support.id, userId, actor: { sub: AGENT, reason: REASON } });
    // The user's own sessions carry no actor.
    const own = await exports.SessionService.authenticate((await issue(userId)).token);
    expect(own && "actor" in own).toBe(false);
  });

  it("the user sees it in GET /auth/sessions, named as support access, with who, why and until when", async () => {
    const { userId, own } = await knownUser();
    const support = await open(userId);
    const response = await call("GET", "/auth/sessions", bearer(own.token));
    expect(response.status).toBe(200);
    const { sessions } = (await response.json()) as { sessions: Record<string, unknown>[] };
    expect(sessions.map((session) => session.id)).toEqual([support.id, own.id]);
    expect(sessions[0]).toMatchObject({
      id: support.id,
      name: `Support access by ${AGENT}`,
      expires_at: support.expiresAt,
      actor: { sub: AGENT, reason: REASON },
    });
    expect(sessions[1]).not.toHaveProperty("actor");
    // The same listing over RPC.
    const listed = await exports.SessionService.listUserSessions(userId);
    expect(listed.find((session) => session.id === support.id)?.actor).toEqual({ sub: AGENT, reason: REASON });
  });

  it("GET /auth/events names the agent on every event of the support session, and on none of the user's own", async () => {
    const { userId, own } = await knownUser();
    const support = await open(userId);
    expect((await call("POST", "/auth/logout", bearer(support.token))).status).toBe(200);
    const response = await call("GET", "/auth/events", bearer(own.token));
    const { events } = (await response.json()) as { events: Record<string, unknown>[] };
    expect(events.map((event) => [event.type, event.session_id, event.actor ?? null])).toEqual([
      ["logout", support.id, { sub: AGENT }],
      ["created", support.id, { sub: AGENT }],
      ["created", own.id, null],
    ]);
  });

  it("ttlSeconds shortens it; a longer one, or a bad one, is a RangeError and writes nothing", async () => {
    const { userId } = await knownUser();
    const short = await open(userId, { ttlSeconds: 600 });
    expect(new Date(short.expiresAt).getTime() - Date.now()).toBeLessThanOrEqual(600_000);
    const before = await tableSnapshot();
    const eventsBefore = await tableSnapshot("session_events");
    for (const ttlSeconds of [3601, 0, -1, 1.5, "60"]) {
      expect(await outcome(() => open(userId, { ttlSeconds }))).toMatch(
        /^(RangeError|TypeError): ttlSeconds must be an integer from 1 to 3600/,
      );
    }
    expect(await tableSnapshot()).toEqual(before);
    expect(await tableSnapshot("session_events")).toEqual(eventsBefore);
  });

  it("bad input is refused before any round trip: no reason, a long or multi-line one, the user as agent, a bad agent id", async () => {
    const { userId } = await knownUser();
    const counter = countingShards(databases());
    const service = new SessionService(createExecutionContext(), { ...env, ...counter.env });
    const reasonRule = `TypeError: reason is required: a ticket or a sentence of at most ${MAX_SUPPORT_REASON_LENGTH} characters, without control or format characters`;
    const cases: [Record<string, unknown>, string][] = [
      [{ reason: undefined }, reasonRule],
      [{ reason: "" }, reasonRule],
      [{ reason: "   " }, reasonRule],
      [{ reason: "x".repeat(MAX_SUPPORT_REASON_LENGTH + 1) }, reasonRule],
      [{ reason: "Ticket 1\nsee logs" }, reasonRule],
      // A right-to-left override would show the user another reason than the one given.
      [{ reason: "Ticket \u202e1174" }, reasonRule],
      [{ reason: 42 }, reasonRule],
      [{ agentId: userId }, "TypeError: agentId must not be the user: support access is by someone else"],
      [{ agentId: "" }, "TypeError: agentId must be a non-empty string"],
      [{ agentId: " ada" }, "TypeError: agentId must be a non-empty string"],
      [{ agentId: undefined }, "TypeError: agentId must be a non-empty string"],
    ];
    for (const [input, message] of cases) {
      const answer = await outcome(() =>
        service.openSupportSession({ userId, agentId: AGENT, reason: REASON, ...input } as never),
      );
      expect(String(answer).startsWith(message), `${JSON.stringify(input)}: ${answer}`).toBe(true);
    }
    expect(await outcome(() => service.openSupportSession({ agentId: AGENT, reason: REASON } as never))).toMatch(
      /^TypeError: userId must be/,
    );
    expect(counter.statements()).toBe(0);
    // A reason of exactly the limit is taken as given.
    const longest = "r".repeat(MAX_SUPPORT_REASON_LENGTH);
    const opened = await open(userId, { reason: longest });
    expect((await exports.SessionService.authenticate(opened.token))?.actor).toEqual({ sub: AGENT, reason: longest });
  });

  it("an unknown user, and a user with as many open as allowed, are refused with a RangeError in one round trip, writing nothing", async () => {
    const stranger = newUser();
    const before = await tableSnapshot();
    const eventsBefore = await tableSnapshot("session_events");
    const counter = countingShards(databases());
    const service = new SessionService(createExecutionContext(), { ...env, ...counter.env });
    expect(await outcome(() => service.openSupportSession({ userId: stranger, agentId: AGENT, reason: REASON }))).toBe(
      "RangeError: userId names no user this service knows: no session and nothing in their log",
    );
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(stranger)]: 1 });
    expect(await tableSnapshot()).toEqual(before);
    expect(await tableSnapshot("session_events")).toEqual(eventsBefore);

    const { userId } = await knownUser();
    for (let i = 0; i < SUPPORT_SESSIONS_PER_USER; i++) await open(userId, { agentId: `agent-${i}` });
    const full = await tableSnapshot();
    const fullEvents = await tableSnapshot("session_events");
    expect(await outcome(() => open(userId))).toBe(
      `RangeError: the user has ${SUPPORT_SESSIONS_PER_USER} open support sessions, the most allowed: end one first`,
    );
    expect(await tableSnapshot()).toEqual(full);
    expect(await tableSnapshot("session_events")).toEqual(fullEvents);
  });

  it("a user known only by their log (every session ended) can be supported", async () => {
    const { userId, own } = await knownUser();
    expect((await call("POST", "/auth/logout", bearer(own.token))).status).toBe(200);
    const support = await open(userId);
    expect(await isLive(support.token)).toBe(true);
  });
});

describe("SESSION_SUPPORT_MAX_SECONDS", () => {
  it("defaults to an hour, takes 60 to 86,400, and never exceeds SESSION_MAX_LIFETIME_SECONDS", () => {
    expect(readConfig(env).supportMaxSeconds).toBe(3600);
    expect(readConfig({ ...env, SESSION_SUPPORT_MAX_SECONDS: "900" }).supportMaxSeconds).toBe(900);
    const short = { ...env, SESSION_MAX_LIFETIME_SECONDS: "1800", SESSION_TTL_SECONDS: "1800" };
    expect(readConfig(short).supportMaxSeconds).toBe(1800);
    for (const [value, rule] of [
      ["59", "SESSION_SUPPORT_MAX_SECONDS must be an integer >= 60"],
      ["86401", "SESSION_SUPPORT_MAX_SECONDS must be <= 86400"],
      ["an hour", "SESSION_SUPPORT_MAX_SECONDS must be an integer >= 60"],
    ])
      expect(() => readConfig({ ...env, SESSION_SUPPORT_MAX_SECONDS: value as string })).toThrow(
        new ConfigError(rule as string),
      );
  });
});

describe("what a support session may not do", () => {
  it("end another session of the user: 403 support_session_refused, nothing ended, nothing logged", async () => {
    const { userId, own } = await knownUser();
    const support = await open(userId);
    const events = await eventsOf(userId);
    await expectError(
      await call("DELETE", `/auth/sessions/${own.id}`, bearer(support.token)),
      403,
      "support_session_refused",
    );
    await expectError(await call("DELETE", "/auth/logout", bearer(support.token)), 403, "support_session_refused");
    await expectError(
      await call("DELETE", "/auth/logout?scope=others", bearer(support.token)),
      403,
      "support_session_refused",
    );
    // By cookie the same, and the cookie stays.
    await expectError(
      await call("DELETE", "/auth/logout", sessionCookie(support.token)),
      403,
      "support_session_refused",
    );
    expect(await isLive(own.token)).toBe(true);
    expect(await isLive(support.token)).toBe(true);
    expect(await eventsOf(userId)).toEqual(events);
  });

  it("be re-authenticated: a RangeError, and the token stays the one it was", async () => {
    const { userId } = await knownUser();
    const support = await open(userId);
    expect(await outcome(() => exports.SessionService.reauthenticate({ token: support.token, factors: ["pwd"] }))).toBe(
      "RangeError: a support session is never re-authenticated: open a new one",
    );
    expect(await isLive(support.token)).toBe(true);
    expect((await eventsOf(userId)).map((event) => event.type)).toEqual(["created", "created"]);
  });

  it("bind a device key: 403 support_session_refused, not bound", async () => {
    const { userId } = await knownUser();
    const support = await open(userId);
    const key = await deviceKey();
    const proof = await signProof(key, "AAAAAAAAAAAAAAAAAAAAAA", { withKey: true });
    await expectError(
      await call("POST", "/auth/dbsc/registration", {
        ...sessionCookie(support.token),
        "Secure-Session-Response": `"${proof}"`,
      }),
      403,
      "support_session_refused",
    );
    const { results } = await (await d1OfUser(userId))
      .prepare("SELECT dbsc_key_thumbprint FROM sessions WHERE id = ?")
      .bind(support.id)
      .all();
    expect(results).toEqual([{ dbsc_key_thumbprint: null }]);
  });

  it("renew itself: a sliding lifetime never moves its end; it ends by itself at its limit", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    const { userId, own } = await knownUser();
    const support = await open(userId);
    const sliding = { SESSION_SLIDING_TTL: "true" } as Partial<Env>;
    vi.setSystemTime(start + HOUR_MS / 2);
    expect((await callWith(sliding, "GET", "/auth/sessions", bearer(support.token))).status).toBe(200);
    const listed = await exports.SessionService.listUserSessions(userId);
    expect(listed.find((session) => session.id === support.id)?.expires_at).toBe(support.expiresAt);
    vi.setSystemTime(new Date(support.expiresAt).getTime());
    await expectError(await call("GET", "/auth/sessions", bearer(support.token)), 401, "invalid_token", {
      wwwAuthenticate: 'Bearer realm="auth", error="invalid_token"',
    });
    expect(await isLive(own.token)).toBe(true);
  });

  it("its own logout works, and so does deleting itself", async () => {
    const { userId } = await knownUser();
    const first = await open(userId);
    await expectMessage(await call("POST", "/auth/logout", bearer(first.token)), "Logged out");
    const second = await open(userId);
    await expectMessage(
      await call("DELETE", `/auth/sessions/${second.id}`, bearer(second.token)),
      "Session deleted",
      CLEARED_COOKIE,
    );
    expect([await isLive(first.token), await isLive(second.token)]).toEqual([false, false]);
  });
});

describe("what support access is not", () => {
  it("a fresh sign-in: authenticate with maxAge never calls it fresh", async () => {
    const { userId, own } = await knownUser();
    const support = await open(userId);
    expect((await exports.SessionService.authenticate(own.token, { maxAge: 3600 }))?.fresh).toBe(true);
    expect((await exports.SessionService.authenticate(support.token, { maxAge: 3600 }))?.fresh).toBe(false);
  });

  it("one of the user's sessions: it neither counts toward SESSION_MAX_PER_USER nor is evicted", async () => {
    const { userId, own } = await knownUser();
    const support = await open(userId);
    const capped = new SessionService(createExecutionContext(), { ...env, SESSION_MAX_PER_USER: "2" });
    const second = await capped.create({ userId, userAgent: "curl/8.5.0" });
    const third = await capped.create({ userId, userAgent: "curl/8.5.0" });
    expect(await Promise.all([own, second, third, support].map((session) => isLive(session.token)))).toEqual([
      false,
      true,
      true,
      true,
    ]);
  });

  it("held back by step-up: with step-up on, a support caller still gets 403, not 401 reauthentication_required", async () => {
    const { userId } = await knownUser();
    const support = await open(userId);
    const stepUp = { SESSION_STEP_UP_MAX_AGE_SECONDS: "600" } as Partial<Env>;
    await expectError(
      await callWith(stepUp, "DELETE", "/auth/logout?scope=others", bearer(support.token)),
      403,
      "support_session_refused",
    );
  });

  it("silent on the events queue: every message of its events names the agent", async () => {
    const { userId } = await knownUser();
    const ctx = createExecutionContext();
    const queued = new SessionService(ctx, { ...env, SESSION_EVENTS: env.TEST_EVENTS_QUEUE } as Env);
    const support = await queued.openSupportSession({ userId, agentId: AGENT, reason: REASON });
    await waitOnExecutionContext(ctx);
    const messages = await vi.waitUntil(
      async () => {
        const list = (await (await env.EVENTS_CONSUMER.fetch("https://consumer/")).json()) as {
          body: { sessionId: string; type: string; actor?: unknown };
        }[];
        const mine = list.map((message) => message.body).filter((message) => message.sessionId === support.id);
        return mine.length > 0 ? mine : undefined;
      },
      { timeout: 5000, interval: 20 },
    );
    expect(messages.map((message) => [message.type, message.actor])).toEqual([["created", { sub: AGENT }]]);
  });
});

describe("ending support access", () => {
  it("the user deletes it like any session, without step-up; the support tool then finds its token dead", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const { userId, own } = await knownUser();
    const device = await issue(userId);
    const support = await open(userId);
    // Signed in 20 minutes ago, under a 10-minute step-up: another device is held back, support access is not.
    vi.setSystemTime(Date.now() + 20 * 60 * 1000);
    const stepUp = { SESSION_STEP_UP_MAX_AGE_SECONDS: "600" } as Partial<Env>;
    expect((await callWith(stepUp, "DELETE", `/auth/sessions/${device.id}`, bearer(own.token))).status).toBe(401);
    await expectMessage(
      await callWith(stepUp, "DELETE", `/auth/sessions/${support.id}`, bearer(own.token)),
      "Session deleted",
    );
    expect(await exports.SessionService.authenticate(support.token)).toBeNull();
    const last = (await eventsOf(userId)).at(-1);
    expect(last).toEqual({ type: "deleted", session_id: support.id, support_agent: AGENT, reason: null });
  });

  it("log out everywhere ends it too", async () => {
    const { userId, own } = await knownUser();
    const support = await open(userId);
    expect((await call("DELETE", "/auth/logout", bearer(own.token))).status).toBe(200);
    expect(await isLive(support.token)).toBe(false);
  });

  it("the support tool ends it early with endSession", async () => {
    const { userId } = await knownUser();
    const support = await open(userId);
    expect(await exports.SessionService.endSession({ sessionId: support.id, reason: "ticket_closed" })).toEqual({
      ended: true,
    });
    expect((await eventsOf(userId)).at(-1)).toEqual({
      type: "ended",
      session_id: support.id,
      support_agent: AGENT,
      reason: "ticket_closed",
    });
  });

  it("endSupportSessions ends every open support session of one agent, for every user, and nothing else", async () => {
    const [a, b] = [await knownUser(), await knownUser()];
    const gone = [await open(a.userId, { agentId: "agent-left" }), await open(b.userId, { agentId: "agent-left" })];
    const stays = await open(a.userId, { agentId: "agent-stays" });
    expect(await exports.SessionService.endSupportSessions({ agentId: "agent-left", reason: "admin" })).toEqual({
      ended: 2,
      moving: 0,
    });
    expect(await Promise.all(gone.map((session) => isLive(session.token)))).toEqual([false, false]);
    expect(await Promise.all([stays, a.own, b.own].map((session) => isLive(session.token)))).toEqual([
      true,
      true,
      true,
    ]);
    expect(await exports.SessionService.endSupportSessions({ agentId: "agent-left", reason: "admin" })).toEqual({
      ended: 0,
      moving: 0,
    });
    expect(await outcome(() => exports.SessionService.endSupportSessions({ agentId: "", reason: "admin" }))).toMatch(
      /^TypeError: agentId must be a user id/,
    );
  });
});
