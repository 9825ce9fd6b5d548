import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards, faultyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  call,
  callWith,
  d1OfUser,
  databases,
  expectError,
  isLive,
  newUser,
  sessionCookie,
  sessionIdsOf,
  tableSnapshot,
} from "./helpers.ts";

// How fresh a sign-in is: the proofs a session carries, re-authentication that rotates the
// token (OWASP ASVS V7.2.4), and step-up before ending other sessions (RFC 9470).

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const START = new Date("2026-11-24T10:00:00.000Z").getTime();
const MINUTE = 60_000;
const RUNS = Math.min(Number(env.FAST_CHECK_RUNS), 25);
const STEP_UP = { SESSION_STEP_UP_MAX_AGE_SECONDS: "600" };
const STEP_UP_CHALLENGE =
  'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="600"';

function create(userId: string, extra: Record<string, unknown> = {}) {
  return exports.SessionService.create({ userId, userAgent: CHROME_MAC, ipAddress: "203.0.113.7", ...extra });
}

async function eventTypes(userId: string): Promise<string[]> {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT type FROM session_events WHERE user_id = ? ORDER BY id")
    .bind(userId)
    .all<{ type: string }>();
  return results.map((row) => row.type);
}

/** The RPC's answer, or the error it threw as a string (the pool reports rejections handed to expect as unhandled). */
async function outcome(rpc: () => Promise<unknown>): Promise<unknown> {
  try {
    return await rpc();
  } catch (error) {
    return String(error);
  }
}

describe("proofs on the session", () => {
  it("create stores the factors with their completion times; authenticate returns them, the latest and the level", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const created = await create(userId, {
      factors: ["otp", { factor: "pwd", completedAt: new Date(START - 2 * MINUTE).toISOString() }],
      assuranceLevel: 2,
    });
    expect(await exports.SessionService.authenticate(created.token)).toEqual({
      sessionId: created.id,
      userId,
      expiresAt: new Date(START + 30 * 86_400_000).toISOString(),
      authenticatedAt: new Date(START).toISOString(),
      factors: [
        { factor: "pwd", completedAt: new Date(START - 2 * MINUTE).toISOString() },
        { factor: "otp", completedAt: new Date(START).toISOString() },
      ],
      assuranceLevel: 2,
      organization: null,
    });
  });

  it("maxAge adds fresh: true up to that many seconds after the latest proof, false after", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const created = await create(newUser(), { factors: ["webauthn"] });
    vi.setSystemTime(START + 10 * MINUTE);
    expect(await exports.SessionService.authenticate(created.token, { maxAge: 600 })).toMatchObject({ fresh: true });
    vi.setSystemTime(START + 10 * MINUTE + 1);
    expect(await exports.SessionService.authenticate(created.token, { maxAge: 600 })).toMatchObject({ fresh: false });
    expect(await exports.SessionService.authenticate(created.token)).not.toHaveProperty("fresh");
  });

  it("refuses bad factors, levels and maxAge before any round trip, storing nothing", async () => {
    const userId = newUser();
    const bad: [Record<string, unknown>, string][] = [
      [{ factors: "pwd" }, "TypeError: factors must be an array of 1 to 22 factors"],
      [{ factors: ["password"] }, "TypeError: each factor must be one of"],
      [{ factors: [null, 7] }, "TypeError: each factor must be one of"],
      [{ factors: [{ factor: "pwd", completedAt: "yesterday" }] }, "RangeError: completedAt must be a valid time"],
      [{ factors: [{ factor: "pwd", completedAt: Date.now() + 3_600_000 }] }, "RangeError: completedAt must be"],
      [{ assuranceLevel: 4 }, "RangeError: assuranceLevel must be 1, 2 or 3"],
    ];
    for (const [extra, message] of bad) expect(String(await outcome(() => create(userId, extra)))).toContain(message);
    expect(await sessionIdsOf(userId)).toEqual([]);
    const created = await create(userId);
    expect(await outcome(() => exports.SessionService.authenticate(created.token, { maxAge: -1 }))).toBe(
      "RangeError: maxAge must be a whole number of seconds",
    );
    expect(await outcome(() => exports.SessionService.reauthenticate({ token: created.token, factors: [] }))).toBe(
      "TypeError: factors must be an array of 1 to 22 factors",
    );
    expect(await isLive(created.token)).toBe(true);
  });
});

describe("reauthenticate", () => {
  it("rotates the token in place: same id, new token and cookie, the old one dead at once, proofs recorded, logged", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const created = await create(userId, { factors: ["pwd"], assuranceLevel: 1 });
    vi.setSystemTime(START + 20 * MINUTE);
    const rotated = await exports.SessionService.reauthenticate({
      token: created.token,
      factors: ["webauthn"],
      assuranceLevel: 2,
    });
    expect(rotated).toEqual({
      sessionId: created.id,
      token: expect.stringMatching(new RegExp(`^${created.id}\\.[A-Za-z0-9_-]{43}$`)),
      expiresAt: created.expiresAt,
      cookie: expect.any(String),
    });
    const { token } = rotated as { token: string };
    expect(token).not.toBe(created.token);
    expect(rotated?.cookie).toBe(
      `__Host-session=${token}; Max-Age=${30 * 86_400 - 20 * 60}; Path=/; HttpOnly; Secure; SameSite=Lax`,
    );
    expect(await exports.SessionService.authenticate(created.token)).toBeNull();
    await expectError(await call("GET", "/auth/sessions", bearer(created.token)), 401, "invalid_token", {
      wwwAuthenticate: 'Bearer realm="auth", error="invalid_token"',
    });
    expect(await exports.SessionService.authenticate(token)).toMatchObject({
      sessionId: created.id,
      authenticatedAt: new Date(START + 20 * MINUTE).toISOString(),
      factors: [
        { factor: "pwd", completedAt: new Date(START).toISOString() },
        { factor: "webauthn", completedAt: new Date(START + 20 * MINUTE).toISOString() },
      ],
      assuranceLevel: 2,
    });
    const listed = (await (await call("GET", "/auth/sessions", bearer(token))).json()) as {
      sessions: { id: string }[];
      currentSessionId: string;
    };
    expect(listed.sessions.map((session) => session.id)).toEqual([created.id]);
    expect(listed.currentSessionId).toBe(created.id);
    expect(await eventTypes(userId)).toEqual(["created", "reauthenticated"]);
  });

  it("cannot revive a session that ended or expired, nor rotate with a dead or malformed token", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const ended = await create(userId);
    const expiring = await create(userId, { ttlSeconds: 60 });
    await call("POST", "/auth/logout", bearer(ended.token));
    vi.setSystemTime(START + 61_000);
    const before = await tableSnapshot();
    for (const token of [ended.token, expiring.token, `${ended.id}.${"A".repeat(43)}`, "not a token"]) {
      expect(await exports.SessionService.reauthenticate({ token, factors: ["pwd"] })).toBeNull();
    }
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(ended.token)).toBe(false);
    expect(await isLive(expiring.token)).toBe(false);
  });

  it("is replay safe: a batch that committed but lost its answer gives the same new token, once", async () => {
    const userId = newUser();
    const created = await create(userId);
    const binding = await bindingOfUser(userId);
    const faulty = faultyD1(await d1OfUser(userId), ["after"]);
    const service = new SessionService(createExecutionContext(), { ...env, [binding]: faulty.db } as Env);
    const rotated = await service.reauthenticate({ token: created.token, factors: ["otp"] });
    expect(faulty.roundTrips).toBe(2);
    expect(rotated?.sessionId).toBe(created.id);
    expect(await isLive(rotated?.token as string)).toBe(true);
    expect(await isLive(created.token)).toBe(false);
    expect(await eventTypes(userId)).toEqual(["created", "reauthenticated"]);
  });

  it("concurrent rotations of one session leave exactly one live secret, the one returned to exactly one caller", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 6 }), async (callers) => {
        const created = await create(newUser());
        const answers = await Promise.all(
          Array.from({ length: callers }, () =>
            exports.SessionService.reauthenticate({ token: created.token, factors: ["pwd"] }),
          ),
        );
        const winners = answers.filter((answer) => answer !== null);
        expect(winners).toHaveLength(1);
        expect(await isLive(winners[0]?.token as string)).toBe(true);
        expect(await isLive(created.token)).toBe(false);
      }),
      { numRuns: RUNS },
    );
  });

  it("reauthenticate and authenticate with maxAge are one round trip each", async () => {
    const userId = newUser();
    const created = await create(userId);
    const counter = countingShards(databases());
    const service = new SessionService(createExecutionContext(), { ...env, ...counter.env } as Env);
    expect(await service.authenticate(created.token, { maxAge: 60 })).toMatchObject({ fresh: true });
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 1 });
    const rotated = await service.reauthenticate({ token: created.token, factors: ["pwd"] });
    expect(rotated).not.toBeNull();
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 2 });
  });
});

describe("step-up (SESSION_STEP_UP_MAX_AGE_SECONDS)", () => {
  async function staleUser() {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const mine = await create(userId, { factors: ["pwd"] });
    const other = await create(userId);
    vi.setSystemTime(START + 10 * MINUTE + 1);
    return { userId, mine, other };
  }

  it("refuses ending another session with a stale sign-in: 401 reauthentication_required, RFC 9470 challenge, nothing changed", async () => {
    const { mine, other } = await staleUser();
    const before = await tableSnapshot();
    await expectError(
      await callWith(STEP_UP, "DELETE", `/auth/sessions/${other.id}`, bearer(mine.token)),
      401,
      "reauthentication_required",
      { wwwAuthenticate: STEP_UP_CHALLENGE },
    );
    await expectError(
      await callWith(STEP_UP, "DELETE", "/auth/logout?scope=others", sessionCookie(mine.token)),
      401,
      "reauthentication_required",
      { wwwAuthenticate: STEP_UP_CHALLENGE },
    );
    // Activity stamps aside, nothing changed: no session ended, no event logged.
    const strip = (rows: unknown[]) => rows.map((row) => ({ ...(row as object), last_active_at: 0 }));
    expect(strip(await tableSnapshot())).toEqual(strip(before));
    expect(await isLive(other.token)).toBe(true);
  });

  it("is not a failed authentication: 35 refusals from one address are all 401, never 429", async () => {
    const { mine, other } = await staleUser();
    const ip = { "CF-Connecting-IP": "2001:db8:5:7::1" };
    for (let i = 0; i < 35; i++) {
      const response = await callWith(STEP_UP, "DELETE", `/auth/sessions/${other.id}`, {
        ...bearer(mine.token),
        ...ip,
      });
      expect(response.status).toBe(401);
    }
    expect((await callWith(STEP_UP, "GET", "/auth/sessions", { ...bearer(mine.token), ...ip })).status).toBe(200);
  });

  it("never blocks leaving: deleting one's own session, logout and log out everywhere", async () => {
    const first = await staleUser();
    expect(
      (await callWith(STEP_UP, "DELETE", `/auth/sessions/${first.mine.id}`, bearer(first.mine.token))).status,
    ).toBe(200);
    const second = await staleUser();
    expect((await callWith(STEP_UP, "POST", "/auth/logout", bearer(second.mine.token))).status).toBe(200);
    const third = await staleUser();
    expect((await callWith(STEP_UP, "DELETE", "/auth/logout", bearer(third.mine.token))).status).toBe(200);
    expect(await isLive(third.other.token)).toBe(false);
  });

  it("a fresh sign-in, or one just renewed by reauthenticate, ends other sessions as usual", async () => {
    const { mine, other } = await staleUser();
    const renewed = await exports.SessionService.reauthenticate({ token: mine.token, factors: ["otp"] });
    const response = await callWith(STEP_UP, "DELETE", `/auth/sessions/${other.id}`, bearer(renewed?.token as string));
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { message: "Session deleted" },
    });
  });

  it("is off by default: a stale sign-in ends other sessions exactly as before", async () => {
    const { mine, other } = await staleUser();
    expect((await call("DELETE", `/auth/sessions/${other.id}`, bearer(mine.token))).status).toBe(200);
    const more = await create(newUser());
    expect((await call("DELETE", "/auth/logout?scope=others", bearer(more.token))).status).toBe(200);
  });
});
