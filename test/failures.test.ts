import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { wrapD1 } from "../src/db/d1.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { CONNECTION_LOST, type Fault, failingD1, faultyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  CLEARED_COOKIE,
  callWith,
  d1,
  d1OfUser,
  expectError,
  expectMessage,
  isLive,
  issue,
  newUser,
  sessionCookie,
  sessionIdsOf,
  wrapShards,
} from "./helpers.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

const OVERLOADED = "D1_ERROR: D1 DB is overloaded. Too many requests queued.";

/** The user's security log, oldest first: what was logged, for which session, by whom. */
async function eventsOf(userId: string) {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT type, session_id, actor_session_id FROM session_events WHERE user_id = ? ORDER BY id")
    .bind(userId)
    .all<{ type: string; session_id: string; actor_session_id: string | null }>();
  return results.map((event) => [event.type, event.session_id, event.actor_session_id]);
}

/**
 * A request whose round trips to `binding` (the database of the user it acts for) fail as
 * `plan` says; also returns how many went to that database.
 */
async function callFaulty(
  binding: string,
  plan: Fault[],
  method: string,
  path: string,
  headers: Record<string, string>,
  message?: string,
) {
  const faulty = faultyD1(d1(binding), plan, message);
  const response = await callWith({ [binding]: faulty.db }, method, path, headers);
  return { response, roundTrips: faulty.roundTrips };
}

async function expectUnavailable(response: Response): Promise<void> {
  expect(response.headers.get("Retry-After")).toBe("1");
  await expectError(response, 503, "service_unavailable");
}

describe("database failure", () => {
  it("every operation answers 500 internal_error with nothing of the failure, and keeps the cookie", async () => {
    const session = await issue(newUser());
    const secretish = `SELECT * FROM sessions WHERE secret_hash = 'deadbeef' -- ${session.token}`;
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    const requests: [string, string, Record<string, string>][] = [
      ["GET", "/auth/sessions", bearer(session.token)],
      ["DELETE", `/auth/sessions/${session.id}`, bearer(session.token)],
      ["DELETE", "/auth/sessions/", bearer(session.token)],
      ["POST", "/auth/logout", sessionCookie(session.token)],
      ["DELETE", "/auth/logout", sessionCookie(session.token)],
    ];
    for (const [method, path, headers] of requests) {
      const response = await callWith(
        wrapShards((d1) => failingD1(d1, secretish)),
        method,
        path,
        headers,
      );
      await expectError(response, 500, "internal_error");
    }
    expect(logged.length).toBeGreaterThan(0);
    // The operator reads what failed (test/failure-log.test.ts), never a value it quoted.
    for (const line of logged) {
      expect(line).not.toContain("deadbeef");
      expect(line).not.toContain(session.token.split(".")[1]);
    }
    expect(logged.filter((line) => line.includes('"event":"unhandled_error"'))).toHaveLength(requests.length);
  });
});

// Each row of issue 11's table: the batch commits, then the connection drops, and the one
// retry replays it. The answer must be what the first attempt did.
describe("a batch that committed but whose answer was lost", () => {
  it("POST /auth/logout: 200 Logged out and the cookie cleared (the session ended)", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const { response, roundTrips } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "POST",
      "/auth/logout",
      sessionCookie(session.token),
    );
    await expectMessage(response, "Logged out", CLEARED_COOKIE);
    expect(roundTrips).toBe(2);
    expect(await isLive(session.token)).toBe(false);
    expect(await eventsOf(userId)).toEqual([
      ["created", session.id, null],
      ["logout", session.id, session.id],
    ]);
  });

  it("POST /auth/report: 200 ended (the session ended once), and the token is used", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const reportToken = session.reportToken as string;
    const { response, roundTrips } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "POST",
      "/auth/report",
      bearer(reportToken),
    );
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { ended: true, next_steps: ["change_password", "review_devices"] },
    });
    expect(roundTrips).toBe(2);
    expect(await isLive(session.token)).toBe(false);
    expect(await eventsOf(userId)).toEqual([
      ["created", session.id, null],
      ["ended", session.id, null],
    ]);
    await expectError(await callWith({}, "POST", "/auth/report", bearer(reportToken)), 410, "report_used");
  });

  it("DELETE /auth/sessions/:id of another of mine: 200 Session deleted", async () => {
    const userId = newUser();
    const mine = await issue(userId);
    const other = await issue(userId);
    const { response } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "DELETE",
      `/auth/sessions/${other.id}`,
      bearer(mine.token),
    );
    await expectMessage(response, "Session deleted");
    expect(await sessionIdsOf(userId)).toEqual([mine.id]);
    expect((await eventsOf(userId)).slice(2)).toEqual([["deleted", other.id, mine.id]]);
  });

  it("DELETE /auth/sessions/:id of my own: 200 Session deleted and the cookie cleared", async () => {
    const userId = newUser();
    const mine = await issue(userId);
    const { response } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "DELETE",
      `/auth/sessions/${mine.id}`,
      bearer(mine.token),
    );
    await expectMessage(response, "Session deleted", CLEARED_COOKIE);
    expect(await sessionIdsOf(userId)).toEqual([]);
    expect((await eventsOf(userId)).slice(1)).toEqual([["deleted", mine.id, mine.id]]);
  });

  it("DELETE /auth/logout: 200 Logged out of all sessions", async () => {
    const userId = newUser();
    const [a, b] = [await issue(userId), await issue(userId)];
    const { response } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "DELETE",
      "/auth/logout",
      sessionCookie(a.token),
    );
    await expectMessage(response, "Logged out of all sessions", CLEARED_COOKIE);
    expect(await sessionIdsOf(userId)).toEqual([]);
    expect((await eventsOf(userId)).slice(2).sort()).toEqual(
      [
        ["logout_all", a.id, a.id],
        ["logout_all", b.id, a.id],
      ].sort(),
    );
  });

  it("DELETE /auth/logout?scope=others: the number that actually ended", async () => {
    const userId = newUser();
    const [me, b, c] = [await issue(userId), await issue(userId), await issue(userId)];
    const { response } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "DELETE",
      "/auth/logout?scope=others",
      bearer(me.token),
    );
    await expectMessage(response, "Logged out of 2 other sessions");
    expect(await sessionIdsOf(userId)).toEqual([me.id]);
    expect((await eventsOf(userId)).slice(3).sort()).toEqual(
      [
        ["logout_others", b.id, me.id],
        ["logout_others", c.id, me.id],
      ].sort(),
    );
  });

  it("SessionService.create: the caller gets the token of the one session that exists", async () => {
    const userId = newUser();
    const faulty = faultyD1(await d1OfUser(userId), ["after"]);
    const service = new SessionService(createExecutionContext(), { ...env, [await bindingOfUser(userId)]: faulty.db });
    const created = await service.create({ userId, userAgent: CHROME_MAC });
    expect(faulty.roundTrips).toBe(2);
    expect(await sessionIdsOf(userId)).toEqual([created.id]);
    expect(await isLive(created.token)).toBe(true);
    expect(await eventsOf(userId)).toEqual([["created", created.id, null]]);
  });

  it("SessionService.create: a session ended between the commit and the replay stays ended", async () => {
    const userId = newUser();
    const userD1 = await d1OfUser(userId);
    let roundTrips = 0;
    // The first attempt commits; before its answer comes back, another request signs the
    // user out everywhere (its events logged, its rows gone); then the answer is lost.
    const racing = wrapD1(userD1, async (call) => {
      const result = await call();
      if (roundTrips++ > 0) return result;
      await userD1.batch([
        userD1
          .prepare(
            "INSERT INTO session_events (user_id, type, session_id, created_at, request_id, device_key) SELECT user_id, 'logout_all', id, ?, 'racing', device_key FROM sessions WHERE user_id = ?",
          )
          .bind(Date.now(), userId),
        userD1.prepare("DELETE FROM sessions WHERE user_id = ?").bind(userId),
      ]);
      throw new Error(CONNECTION_LOST);
    });
    const service = new SessionService(createExecutionContext(), { ...env, [await bindingOfUser(userId)]: racing });
    const created = await service.create({ userId, userAgent: CHROME_MAC });
    expect(roundTrips).toBe(2);
    // It was created (the caller is told so, with its token), and it was ended: it stays ended.
    expect(await sessionIdsOf(userId)).toEqual([]);
    expect(await isLive(created.token)).toBe(false);
    expect(await eventsOf(userId)).toEqual([
      ["created", created.id, null],
      ["logout_all", created.id, null],
    ]);
  });

  it("a refusal stays a refusal: a dead token's logout answers 400 after the replay, as without it", async () => {
    const userId = newUser();
    const session = await issue(userId);
    await callWith({}, "POST", "/auth/logout", bearer(session.token));
    const { response } = await callFaulty(
      await bindingOfUser(userId),
      ["after"],
      "POST",
      "/auth/logout",
      bearer(session.token),
    );
    await expectError(response, 400, "session_invalid");
  });
});

describe("overload: 503 service_unavailable with Retry-After, never 500", () => {
  it("an overloaded D1 is not retried, and the logout keeps its cookie for the client's retry", async () => {
    const userId = newUser();
    const session = await issue(userId);
    for (const message of [OVERLOADED, "D1_ERROR: D1 DB is overloaded. Requests queued for too long."]) {
      const { response, roundTrips } = await callFaulty(
        await bindingOfUser(userId),
        ["before"],
        "POST",
        "/auth/logout",
        sessionCookie(session.token),
        message,
      );
      await expectUnavailable(response);
      expect(roundTrips).toBe(1);
    }
    expect(await isLive(session.token)).toBe(true);
  });

  it("a transient error twice: 503 on every operation, cookie kept", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const requests: [string, string, Record<string, string>][] = [
      ["GET", "/auth/sessions", bearer(session.token)],
      ["GET", "/auth/events", bearer(session.token)],
      ["DELETE", `/auth/sessions/${session.id}`, bearer(session.token)],
      ["DELETE", "/auth/sessions/", bearer(session.token)],
      ["POST", "/auth/logout", sessionCookie(session.token)],
      ["DELETE", "/auth/logout", sessionCookie(session.token)],
      ["DELETE", "/auth/logout?scope=others", sessionCookie(session.token)],
      ["GET", "/auth/report", bearer(session.reportToken as string)],
      ["POST", "/auth/report", bearer(session.reportToken as string)],
    ];
    for (const [method, path, headers] of requests) {
      const { response, roundTrips } = await callFaulty(
        await bindingOfUser(userId),
        ["before", "before"],
        method,
        path,
        headers,
      );
      await expectUnavailable(response);
      expect(roundTrips).toBe(2);
    }
    expect(await isLive(session.token)).toBe(true);
  });

  it("a 503 is never counted against the client's failed-authentication limit", async () => {
    const ip = "198.51.100.203";
    // Well-formed, unknown, and naming bucket 0 of the default region: the first database.
    const dead = `${"A".repeat(24)}.${"B".repeat(43)}`;
    for (let i = 0; i < 40; i++) {
      const { response } = await callFaulty(
        "DB",
        ["before"],
        "GET",
        "/auth/sessions",
        { ...bearer(dead), "CF-Connecting-IP": ip },
        OVERLOADED,
      );
      expect(response.status).toBe(503);
    }
    const response = await callWith({}, "GET", "/auth/sessions", { ...bearer(dead), "CF-Connecting-IP": ip });
    expect(response.status).toBe(401);
  });

  it("SessionService: create and authenticate throw a clear retryable error, create leaves no session", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const binding = await bindingOfUser(userId);
    for (const plan of [["before", "before"], ["before"]] as Fault[][]) {
      const message = plan.length === 2 ? CONNECTION_LOST : OVERLOADED;
      const faulty = async () => ({ ...env, [binding]: faultyD1(await d1OfUser(userId), plan, message).db });
      const service = new SessionService(createExecutionContext(), await faulty());
      await expect(service.create({ userId })).rejects.toThrow("The session database is unavailable. Retry shortly.");
      const checking = new SessionService(createExecutionContext(), await faulty());
      await expect(checking.authenticate(session.token)).rejects.toThrow(
        "The session database is unavailable. Retry shortly.",
      );
    }
    expect(await sessionIdsOf(userId)).toEqual([session.id]);
  });
});
