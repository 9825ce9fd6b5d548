import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { type Fault, faultyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  CLEARED_COOKIE,
  call,
  callWith,
  d1,
  databases,
  newUser,
  sessionCookie,
} from "./helpers.ts";

// Model-based test: random sequences of the service's operations across several users,
// each checked step by step against a small in-memory model of who holds which live
// session, and the table against the model after every step. The clock is injected (fake
// Date), never slept on. TTLs are at most an hour and a run spans hours, so the 14-day idle
// timeout never comes into play here.
//
// Every operation runs on a faulty D1: no fault, one (before the call, or after the commit
// with the answer lost), or two (both attempts fail). After one fault the answer must be the
// true one; after two it must be 503 service_unavailable, and the model takes the effect
// exactly when one of the attempts committed. Faults are injected on the database that holds
// the acting user (the suite runs at one database and at four): the only one asked.

const RUNS = Number(env.FAST_CHECK_RUNS);
const USERS = 3;

interface ModelSession {
  id: string;
  /** Null for a session that committed while its creator got an error: nobody holds it. */
  token: string | null;
  user: number;
  expiresAt: number;
  /** Ended by an operation while live (so the log holds exactly one ending event for it). */
  ended: boolean;
}

interface Model {
  now: number;
  sessions: ModelSession[];
}

interface Real {
  users: string[];
  /** The binding of each user's database. */
  bindings: string[];
}

type Faults = readonly Fault[];

const isLive = (model: Model, session: ModelSession) => !session.ended && session.expiresAt > model.now;
const liveOf = (model: Model, user: number) => model.sessions.filter((s) => s.user === user && isLive(model, s));
const holders = (model: Model) => model.sessions.filter((s): s is ModelSession & { token: string } => !!s.token);
const pickCaller = (model: Model, index: number) => holders(model)[index % holders(model).length]!;
const pick = (model: Model, index: number) => model.sessions[index % model.sessions.length];
const answered = (faults: Faults) => faults.length < 2;
const committed = (faults: Faults) => answered(faults) || faults.includes("after");
const faultLabel = (faults: Faults) => (faults.length ? `, D1 fails ${faults.join(" then ")}` : "");

type Via = "bearer" | "cookie";
const credential = (session: { token: string }, via: Via) =>
  via === "bearer" ? bearer(session.token) : sessionCookie(session.token);

/** The table agrees with the model: the same live sessions, one `created` event per session
 * and one ending event per session ended while live. */
async function expectTableMatches(model: Model, real: Real): Promise<void> {
  const users = real.users.map(() => "?").join(", ");
  const rows: { id: string }[] = [];
  const events: { session_id: string; type: string }[] = [];
  for (const db of Object.values(databases())) {
    const live = await db
      .prepare(`SELECT id FROM sessions WHERE user_id IN (${users}) AND expires_at > ?`)
      .bind(...real.users, model.now)
      .all<{ id: string }>();
    rows.push(...live.results);
    const logged = await db
      .prepare(`SELECT session_id, type FROM session_events WHERE user_id IN (${users})`)
      .bind(...real.users)
      .all<{ session_id: string; type: string }>();
    events.push(...logged.results);
  }
  expect(rows.map((row) => row.id).sort()).toEqual(
    model.sessions
      .filter((s) => isLive(model, s))
      .map((s) => s.id)
      .sort(),
  );
  const logged = (id: string) => {
    const own = events.filter((event) => event.session_id === id);
    return { id, created: own.filter((e) => e.type === "created").length, ended: own.length - 1 };
  };
  expect(model.sessions.map((s) => logged(s.id))).toEqual(
    model.sessions.map((s) => ({ id: s.id, created: 1, ended: s.ended ? 1 : 0 })),
  );
  expect(events.length).toBe(model.sessions.length + model.sessions.filter((s) => s.ended).length);
}

function command(
  label: string,
  run: (model: Model, real: Real) => Promise<void>,
  needsCaller = true,
): fc.AsyncCommand<Model, Real> {
  return {
    check: (model) => !needsCaller || holders(model).length > 0,
    run: async (model, real) => {
      await run(model, real);
      await expectTableMatches(model, real);
    },
    toString: () => label,
  };
}

interface Expected {
  status: number;
  /** The error code, or the whole success body. */
  code?: string;
  body?: unknown;
  setCookie: string | null;
  /** What the operation does to the model when it takes effect. */
  effect?: () => void;
}

/** One HTTP request, its user's database (`binding`) failing as `faults` says, checked against `expected`. */
async function request(
  binding: string,
  faults: Faults,
  method: string,
  path: string,
  headers: Record<string, string>,
  expected: Expected,
): Promise<Response> {
  const response = await callWith({ [binding]: faultyD1(d1(binding), faults).db }, method, path, headers);
  const body = (await response.clone().json()) as { code?: string };
  const seen = { status: response.status, setCookie: response.headers.get("Set-Cookie") };
  if (!answered(faults)) {
    expect({ ...seen, code: body.code, retryAfter: response.headers.get("Retry-After") }).toEqual({
      status: 503,
      setCookie: null,
      code: "service_unavailable",
      retryAfter: "1",
    });
  } else {
    expect(seen).toEqual({ status: expected.status, setCookie: expected.setCookie });
    if (expected.code !== undefined) expect(body.code).toBe(expected.code);
    if (expected.body !== undefined) expect(body).toEqual(expected.body);
  }
  if (committed(faults)) expected.effect?.();
  return response;
}

const createSession = (user: number, ttlSeconds: number, faults: Faults) =>
  command(
    `create(user ${user}, ttl ${ttlSeconds}s${faultLabel(faults)})`,
    async (model, real) => {
      const binding = real.bindings[user]!;
      const service = new SessionService(createExecutionContext(), {
        ...env,
        [binding]: faultyD1(d1(binding), faults).db,
      });
      const creating = service.create({
        userId: real.users[user]!,
        userAgent: CHROME_MAC,
        ipAddress: "203.0.113.7",
        ttlSeconds,
      });
      const expiresAt = model.now + ttlSeconds * 1000;
      if (answered(faults)) {
        const created = await creating;
        expect(new Date(created.expiresAt).getTime()).toBe(expiresAt);
        model.sessions.push({ id: created.id, token: created.token, user, expiresAt, ended: false });
        return;
      }
      await expect(creating).rejects.toThrow("The session database is unavailable. Retry shortly.");
      if (!committed(faults)) return;
      // Committed, but both answers were lost: the session exists and nobody holds its token.
      const known = new Set(model.sessions.map((s) => s.id));
      const { results } = await d1(binding)
        .prepare("SELECT id FROM sessions WHERE user_id = ?")
        .bind(real.users[user])
        .all<{ id: string }>();
      const orphans = results.map((row) => row.id).filter((id) => !known.has(id));
      expect(orphans).toHaveLength(1);
      model.sessions.push({ id: orphans[0]!, token: null, user, expiresAt, ended: false });
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

const list = (by: number, faults: Faults) =>
  command(`list(by #${by}${faultLabel(faults)})`, async (model, real) => {
    const caller = pickCaller(model, by);
    const live = isLive(model, caller);
    const sessions = liveOf(model, caller.user)
      .map((s) => s.id)
      .sort();
    const response = await request(real.bindings[caller.user]!, faults, "GET", "/auth/sessions", bearer(caller.token), {
      status: live ? 200 : 401,
      setCookie: null,
    });
    if (answered(faults) && live) {
      const body = (await response.json()) as { sessions: { id: string }[]; currentSessionId: string };
      expect(body.currentSessionId).toBe(caller.id);
      expect(body.sessions.map((s) => s.id).sort()).toEqual(sessions);
    }
  });

const deleteById = (by: number, targetIndex: number | "unknown" | "self", faults: Faults) =>
  command(`delete(#${targetIndex} by #${by}${faultLabel(faults)})`, async (model, real) => {
    const caller = pickCaller(model, by);
    const target = targetIndex === "unknown" ? undefined : targetIndex === "self" ? caller : pick(model, targetIndex);
    const path = `/auth/sessions/${target?.id ?? "A".repeat(24)}`;
    let expected: Expected;
    if (!isLive(model, caller)) expected = { status: 401, code: "invalid_token", setCookie: null };
    else if (!target || !isLive(model, target) || target.user !== caller.user)
      expected = { status: 401, code: "not_authorized", setCookie: null };
    else
      expected = {
        status: 200,
        body: { message: "Session deleted" },
        setCookie: target === caller ? CLEARED_COOKIE : null,
        effect: () => {
          target.ended = true;
        },
      };
    await request(real.bindings[caller.user]!, faults, "DELETE", path, bearer(caller.token), expected);
  });

const logout = (by: number, via: Via, faults: Faults) =>
  command(`logout(#${by} by ${via}${faultLabel(faults)})`, async (model, real) => {
    const caller = pickCaller(model, by);
    const live = isLive(model, caller);
    await request(real.bindings[caller.user]!, faults, "POST", "/auth/logout", credential(caller, via), {
      status: live ? 200 : 400,
      ...(live ? { body: { message: "Logged out" } } : { code: "session_invalid" }),
      setCookie: via === "cookie" ? CLEARED_COOKIE : null,
      effect: () => {
        if (live) caller.ended = true;
      },
    });
  });

const logoutMany = (by: number, via: Via, others: boolean, faults: Faults) =>
  command(`logout-${others ? "others" : "all"}(#${by} by ${via}${faultLabel(faults)})`, async (model, real) => {
    const caller = pickCaller(model, by);
    const live = isLive(model, caller);
    const ending = live ? liveOf(model, caller.user).filter((s) => !others || s !== caller) : [];
    const n = ending.length;
    const message = others ? `Logged out of ${n} other session${n === 1 ? "" : "s"}` : "Logged out of all sessions";
    await request(
      real.bindings[caller.user]!,
      faults,
      "DELETE",
      others ? "/auth/logout?scope=others" : "/auth/logout",
      credential(caller, via),
      {
        status: live ? 200 : 401,
        ...(live ? { body: { message } } : { code: "session_invalid" }),
        setCookie: via === "cookie" && !(others && live) ? CLEARED_COOKIE : null,
        effect: () => {
          for (const session of ending) session.ended = true;
        },
      },
    );
  });

const fault = fc.constantFrom<Fault>("before", "after");
const faults: fc.Arbitrary<Faults> = fc.oneof(
  { weight: 4, arbitrary: fc.constant([]) },
  { weight: 2, arbitrary: fc.tuple(fault) },
  { weight: 1, arbitrary: fc.tuple(fault, fault) },
);
const via = fc.constantFrom<Via>("bearer", "cookie");
const index = fc.nat({ max: 40 });
const commands = [
  fc
    .tuple(fc.nat({ max: USERS - 1 }), fc.integer({ min: 1, max: 3600 }), faults)
    .map(([u, ttl, f]) => createSession(u, ttl, f)),
  fc.integer({ min: 1, max: 30 * 60 * 1000 }).map(advanceClock),
  fc.tuple(index, faults).map(([c, f]) => list(c, f)),
  fc
    .tuple(index, fc.oneof(index, fc.constant("unknown" as const), fc.constant("self" as const)), faults)
    .map(([c, t, f]) => deleteById(c, t, f)),
  fc.tuple(index, via, faults).map(([c, v, f]) => logout(c, v, f)),
  fc.tuple(index, via, fc.boolean(), faults).map(([c, v, o, f]) => logoutMany(c, v, o, f)),
];

afterEach(() => {
  vi.useRealTimers();
});

describe("model-based, on a D1 that fails before the call, after the commit, or twice", () => {
  it("every answer, listed set, cleared cookie and the table itself match the model", {
    timeout: 60_000 + RUNS * 600,
  }, async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 40, size: "+1" }), async (cmds) => {
        const start = Date.UTC(2026, 10, 22, 12);
        vi.setSystemTime(start);
        const users = Array.from({ length: USERS }, newUser);
        const real: Real = { users, bindings: await Promise.all(users.map((user) => bindingOfUser(user))) };
        const model: Model = { now: start, sessions: [] };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        // Afterwards, every token the model holds dead is dead for the service as well.
        for (const session of holders(model)) {
          const response = await call("GET", "/auth/sessions", bearer(session.token));
          expect(response.status).toBe(isLive(model, session) ? 200 : 401);
        }
      }),
      { numRuns: Math.max(20, Math.round(RUNS / 4)) },
    );
  });
});
