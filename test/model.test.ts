import { env } from "cloudflare:workers";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearer, CLEARED_COOKIE, call, issue, newUser, sessionCookie } from "./helpers.ts";

// Model-based test: random sequences of the service's operations across several users,
// each checked step by step against a small in-memory model of who holds which live
// session. The clock is injected (fake Date), never slept on. TTLs are at most an hour
// and a run spans hours, so the 14-day idle timeout never comes into play here.

const RUNS = Number(env.FAST_CHECK_RUNS);
const USERS = 3;

interface ModelSession {
  id: string;
  token: string;
  user: number;
  expiresAt: number;
  ended: boolean;
}

interface Model {
  now: number;
  sessions: ModelSession[];
}

interface Real {
  users: string[];
}

const isLive = (model: Model, session: ModelSession) => !session.ended && session.expiresAt > model.now;
const liveOf = (model: Model, user: number) => model.sessions.filter((s) => s.user === user && isLive(model, s));
const pick = (model: Model, index: number) => model.sessions[index % model.sessions.length];

type Via = "bearer" | "cookie";
const credential = (session: ModelSession, via: Via) =>
  via === "bearer" ? bearer(session.token) : sessionCookie(session.token);

function command(
  label: string,
  run: (model: Model, real: Real) => Promise<void>,
  needsSessions = true,
): fc.AsyncCommand<Model, Real> {
  return { check: (model) => !needsSessions || model.sessions.length > 0, run, toString: () => label };
}

const createSession = (user: number, ttlSeconds: number) =>
  command(
    `create(user ${user}, ttl ${ttlSeconds}s)`,
    async (model, real) => {
      const created = await issue(real.users[user]!, { ttlSeconds });
      expect(new Date(created.expiresAt).getTime()).toBe(model.now + ttlSeconds * 1000);
      model.sessions.push({ ...created, user, expiresAt: model.now + ttlSeconds * 1000, ended: false });
    },
    false,
  );

const advanceClock = (ms: number) =>
  command(
    `advance(${ms} ms)`,
    async (model) => {
      model.now += ms;
      vi.setSystemTime(model.now);
    },
    false,
  );

const list = (by: number) =>
  command(`list(by #${by})`, async (model) => {
    const caller = pick(model, by)!;
    const response = await call("GET", "/auth/sessions", bearer(caller.token));
    if (!isLive(model, caller)) {
      expect(response.status).toBe(401);
      return;
    }
    expect(response.status).toBe(200);
    const body = (await response.json()) as { sessions: { id: string }[]; currentSessionId: string };
    expect(body.currentSessionId).toBe(caller.id);
    expect(body.sessions.map((s) => s.id).sort()).toEqual(
      liveOf(model, caller.user)
        .map((s) => s.id)
        .sort(),
    );
  });

const deleteById = (by: number, targetIndex: number | "unknown") =>
  command(`delete(#${targetIndex} by #${by})`, async (model) => {
    const caller = pick(model, by)!;
    const target = targetIndex === "unknown" ? undefined : pick(model, targetIndex);
    const response = await call(
      "DELETE",
      `/auth/sessions/${target?.id ?? "AAAAAAAAAAAAAAAAAAAAAA"}`,
      bearer(caller.token),
    );
    const code = async () => ((await response.json()) as { code: string }).code;
    if (!isLive(model, caller)) {
      expect([response.status, await code()]).toEqual([401, "invalid_token"]);
      return;
    }
    if (!target || !isLive(model, target) || target.user !== caller.user) {
      expect([response.status, await code()]).toEqual([401, "not_authorized"]);
      return;
    }
    expect(response.status).toBe(200);
    expect(response.headers.get("Set-Cookie")).toBe(target === caller ? CLEARED_COOKIE : null);
    target.ended = true;
  });

const logout = (by: number, via: Via) =>
  command(`logout(#${by} by ${via})`, async (model) => {
    const caller = pick(model, by)!;
    const response = await call("POST", "/auth/logout", credential(caller, via));
    expect(response.status).toBe(isLive(model, caller) ? 200 : 400);
    expect(response.headers.get("Set-Cookie")).toBe(via === "cookie" ? CLEARED_COOKIE : null);
    caller.ended = true;
  });

const logoutMany = (by: number, via: Via, others: boolean) =>
  command(`logout-${others ? "others" : "all"}(#${by} by ${via})`, async (model) => {
    const caller = pick(model, by)!;
    const response = await call(
      "DELETE",
      others ? "/auth/logout?scope=others" : "/auth/logout",
      credential(caller, via),
    );
    const clears = via === "cookie" && !(others && isLive(model, caller));
    expect(response.headers.get("Set-Cookie")).toBe(clears ? CLEARED_COOKIE : null);
    if (!isLive(model, caller)) {
      expect(response.status).toBe(401);
      return;
    }
    expect(response.status).toBe(200);
    const ending = liveOf(model, caller.user).filter((s) => !others || s !== caller);
    if (others) {
      const n = ending.length;
      expect(await response.json()).toEqual({ message: `Logged out of ${n} other session${n === 1 ? "" : "s"}` });
    }
    for (const session of ending) session.ended = true;
  });

const via = fc.constantFrom<Via>("bearer", "cookie");
const index = fc.nat({ max: 40 });
const commands = [
  fc.tuple(fc.nat({ max: USERS - 1 }), fc.integer({ min: 1, max: 3600 })).map(([u, ttl]) => createSession(u, ttl)),
  fc.integer({ min: 1, max: 30 * 60 * 1000 }).map(advanceClock),
  index.map(list),
  fc.tuple(index, fc.oneof(index, fc.constant("unknown" as const))).map(([c, t]) => deleteById(c, t)),
  fc.tuple(index, via).map(([c, v]) => logout(c, v)),
  fc.tuple(index, via, fc.boolean()).map(([c, v, o]) => logoutMany(c, v, o)),
];

afterEach(() => {
  vi.useRealTimers();
});

describe("model-based", () => {
  it("every status, listed set, currentSessionId and cleared cookie matches the model", {
    timeout: 60_000 + RUNS * 300,
  }, async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (cmds) => {
        const start = Date.UTC(2026, 10, 22, 12);
        vi.setSystemTime(start);
        const real: Real = { users: Array.from({ length: USERS }, newUser) };
        const model: Model = { now: start, sessions: [] };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        // Afterwards, every token the model holds dead is dead for the service as well.
        for (const session of model.sessions) {
          const response = await call("GET", "/auth/sessions", bearer(session.token));
          expect(response.status).toBe(isLive(model, session) ? 200 : 401);
        }
      }),
      { numRuns: Math.max(20, Math.round(RUNS / 4)) },
    );
  });
});
