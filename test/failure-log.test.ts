import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { newAdminKey } from "../src/domain/admin-keys.ts";
import { DatabaseUnavailable } from "../src/domain/errors.ts";
import { logLine } from "../src/domain/log.ts";
import { hashSecret } from "../src/domain/token.ts";
import { USER_ID_RULE } from "../src/domain/user-id.ts";
import { InternalError, SessionService } from "../src/rpc/session-service.ts";
import { redact } from "../src/services/failure-log.ts";
import { failingD1, faultyD1, flakyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  COOKIE_NAME,
  call,
  callWith,
  d1OfUser,
  expectError,
  FAILURE_LIMIT,
  insideOneLimiterWindow,
  isLive,
  issue,
  newUser,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";

// A locked database is a retryable answer, never a 500; and every 5xx leaves one log line an
// operator can act on (what, where, which database, which request) with nothing secret in it.

afterEach(() => {
  vi.restoreAllMocks();
});

const LOCKED = "D1_ERROR: database is locked: SQLITE_BUSY";
const SNAPSHOT = "D1_ERROR: database is locked: SQLITE_BUSY (extended: SQLITE_BUSY_SNAPSHOT)";

/** Every console line written from here on, whatever the level. */
function captureConsole(): string[] {
  const lines: string[] = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
  }
  return lines;
}

/** A session and every form its secrets take: token, secret half, stored hash, cookie header. */
async function secretsOf(userId = newUser()) {
  const session = await issue(userId);
  const secret = session.token.split(".")[1] as string;
  return {
    userId,
    session,
    secrets: [session.token, secret, await hashSecret(secret), `${COOKIE_NAME}=${session.token}`],
  };
}

function expectNoSecret(lines: string[], secrets: string[]) {
  for (const line of lines) for (const secret of secrets) expect(line).not.toContain(secret);
}

describe("a locked or busy database", () => {
  it("is retried once: a lock that clears answers as usual, in two round trips", async () => {
    const { userId, session } = await secretsOf();
    const locked = flakyD1(await d1OfUser(userId), 1, () => new Error(LOCKED));
    const response = await callWith(
      { [await bindingOfUser(userId)]: locked.db },
      "GET",
      "/auth/sessions",
      bearer(session.token),
    );
    expect(response.status).toBe(200);
    expect(locked.roundTrips).toBe(2);
  });

  it("that stays locked answers 503 service_unavailable with Retry-After, never 500, and changes nothing", async () => {
    const { userId, session } = await secretsOf();
    const before = await tableSnapshot();
    for (const message of [LOCKED, SNAPSHOT, "D1_ERROR: database table is locked: SQLITE_LOCKED"]) {
      const locked = faultyD1(await d1OfUser(userId), ["before", "before"], message);
      const response = await callWith(
        { [await bindingOfUser(userId)]: locked.db },
        "DELETE",
        "/auth/logout",
        sessionCookie(session.token),
      );
      await expectError(response, 503, "service_unavailable", { retryAfter: "1" });
      expect(locked.roundTrips).toBe(2);
    }
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });

  it("is DatabaseUnavailable for RPC callers", async () => {
    const { userId, session } = await secretsOf();
    const locked = failingD1(await d1OfUser(userId), LOCKED);
    const service = new SessionService(createExecutionContext(), {
      ...env,
      [await bindingOfUser(userId)]: locked,
    } as Env);
    await expect(service.authenticate(session.token)).rejects.toBeInstanceOf(DatabaseUnavailable);
  });
});

describe("the log line of an unexpected error", () => {
  it("says what failed, on which route, database and request, with every secret redacted", async () => {
    const { userId, session, secrets } = await secretsOf();
    const [token, , hash, cookie] = secrets as [string, string, string, string];
    const binding = await bindingOfUser(userId);
    const lines = captureConsole();
    const failing = failingD1(
      await d1OfUser(userId),
      `D1_ERROR: no such column: secret_hash2 at offset 7: SQLITE_ERROR (${token} ${hash} ${cookie} 'a bound value')`,
    );
    const response = await callWith({ [binding]: failing }, "DELETE", `/auth/sessions/${session.id}`, {
      ...bearer(token),
      "cf-ray": "8f3a2b1c4d5e6f70-FRA",
    });
    await expectError(response, 500, "internal_error");
    const logged = lines.map((line) => JSON.parse(line)).find((line) => line.event === "unhandled_error");
    expect(logged).toEqual({
      level: "error",
      event: "unhandled_error",
      name: "InjectedFailure",
      message:
        "D1_ERROR: no such column: secret_hash2 at offset 7: SQLITE_ERROR ([redacted] [redacted] [redacted] [redacted])",
      method: "DELETE",
      route: "/auth/sessions/:id{[^\\x2F]*}",
      binding,
      request_id: "8f3a2b1c4d5e6f70-FRA",
    });
    expectNoSecret(lines, secrets);
  });

  it("names the RPC method and database; the caller gets an InternalError, never the driver's message", async () => {
    const { userId, session, secrets } = await secretsOf();
    const binding = await bindingOfUser(userId);
    const lines = captureConsole();
    const failing = failingD1(await d1OfUser(userId), `D1_ERROR: disk I/O error: SQLITE_IOERR ${secrets[2]}`);
    const service = new SessionService(createExecutionContext(), { ...env, [binding]: failing } as Env);
    await expect(service.endSession({ sessionId: session.id, reason: "admin" })).rejects.toThrow(InternalError);
    expect(JSON.parse(lines.at(-1) as string)).toEqual({
      level: "error",
      event: "unhandled_error",
      name: "InjectedFailure",
      message: "D1_ERROR: disk I/O error: SQLITE_IOERR [redacted]",
      rpc: "endSession",
      binding,
      request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expectNoSecret(lines, secrets);
    // Refusals the caller can act on are not an operator's concern: no line.
    const before = lines.length;
    await expect(service.create({ userId: "" })).rejects.toBeInstanceOf(TypeError);
    expect(lines).toHaveLength(before);
  });

  it("redacts tokens, ids, hashes and quoted values, and keeps SQLite's words", () => {
    expect(
      redact(
        "D1_ERROR: UNIQUE constraint failed: sessions.id SQLITE_BUSY_SNAPSHOT sessions_user_id_expires_at_idx " +
          `AAabcdefghijklmnopqrstuv.${"x1".repeat(21)} ${"ab12".repeat(16)} "quoted" 1795560770220`,
      ),
    ).toBe(
      "D1_ERROR: UNIQUE constraint failed: sessions.id SQLITE_BUSY_SNAPSHOT sessions_user_id_expires_at_idx " +
        "[redacted] [redacted] [redacted] 1795560770220",
    );
    expect(redact("x".repeat(1000))).toHaveLength(300);
  });
});

describe("a bug is the service's failure, never the caller's fault", () => {
  // A TypeError thrown under a service call, as a bug's own would be: once a 400 that blamed the
  // caller with the bug's message; now a 500 on every door, its line in the operator's log.
  const BUG = "Cannot read properties of undefined (reading 'x')";

  /** The user's database, its first round trip failing with the bug. */
  async function buggy(userId: string): Promise<Partial<Env>> {
    return { [await bindingOfUser(userId)]: flakyD1(await d1OfUser(userId), 1, () => new TypeError(BUG)).db };
  }

  async function lineOf(lines: string[], userId: string, site: Record<string, string>) {
    expect(lines.map((line) => JSON.parse(line)).filter((line) => line.event === "unhandled_error")).toEqual([
      {
        level: "error",
        event: "unhandled_error",
        name: "TypeError",
        message: "Cannot read properties of undefined (reading [redacted])",
        ...site,
        binding: await bindingOfUser(userId),
        request_id: expect.any(String),
      },
    ]);
  }

  it("an HTTP route: 500 internal_error and its line", async () => {
    const { userId, session } = await secretsOf();
    const lines = captureConsole();
    const response = await callWith(await buggy(userId), "GET", "/auth/whoami", bearer(session.token));
    expect(await response.clone().text()).not.toContain("Cannot read");
    await expectError(response, 500, "internal_error");
    await lineOf(lines, userId, { method: "GET", route: "/auth/whoami" });
  });

  it("an admin route: 500 internal_error and its line, never 400 invalid_input", async () => {
    const userId = newUser();
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const before = await tableSnapshot();
    const lines = captureConsole();
    const response = await callWith(
      { ...(await buggy(userId)), ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>,
      "POST",
      "/admin/sessions",
      { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      JSON.stringify({ userId }),
    );
    expect(await response.clone().text()).not.toContain("Cannot read");
    await expectError(response, 500, "internal_error");
    await lineOf(lines, userId, { method: "POST", route: "/admin/sessions" });
    expect(await tableSnapshot()).toEqual(before);
  });

  it("the RPC: an InternalError naming its line's request_id, and the line; bad input is still the caller's TypeError", async () => {
    const userId = newUser();
    const lines = captureConsole();
    const service = new SessionService(createExecutionContext(), { ...env, ...(await buggy(userId)) } as Env);
    const failed = await service.create({ userId }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(InternalError);
    await lineOf(lines, userId, { rpc: "create" });
    const { request_id } = JSON.parse(lines.at(-1) as string);
    expect(String(failed)).toBe(
      `InternalError: The session service failed; its log line has request_id ${request_id}.`,
    );
    await expect(service.create({ userId: "" })).rejects.toThrow(new TypeError(`userId must be ${USER_ID_RULE}`));
    await expect(service.create({ userId, ttlSeconds: 0 })).rejects.toThrow(RangeError);
    expect(lines).toHaveLength(1);
  });
});

describe("every log line (src/domain/log.ts)", () => {
  it("is one JSON object, level and event first, through its level's console method or the one named", () => {
    const calls: [string, string][] = [];
    for (const method of ["log", "info", "warn", "error", "debug"] as const)
      vi.spyOn(console, method).mockImplementation((line: unknown) => void calls.push([method, String(line)]));
    logLine("info", "purge", { sessions: 2, failed: [] });
    logLine("warn", "bucket_moving");
    logLine("error", "config_error", { message: "m" });
    logLine("warn", "outbox_send_failed", { name: "Error" }, "error");
    expect(calls).toEqual([
      ["log", '{"level":"info","event":"purge","sessions":2,"failed":[]}'],
      ["warn", '{"level":"warn","event":"bucket_moving"}'],
      ["error", '{"level":"error","event":"config_error","message":"m"}'],
      ["error", '{"level":"warn","event":"outbox_send_failed","name":"Error"}'],
    ]);
  });
});

describe("no error path writes a secret to any log line", () => {
  it("400, 401, 403, 404, 405, 414, 429, 503 (unavailable and moving) and 500 (configuration and unexpected)", async () => {
    const { userId, session, secrets } = await secretsOf();
    const binding = await bindingOfUser(userId);
    const dead = await secretsOf();
    await call("DELETE", "/auth/logout", bearer(dead.session.token));
    const allSecrets = [...secrets, ...dead.secrets];
    const lines = captureConsole();
    const cookie = sessionCookie(session.token);
    const deadCookie = sessionCookie(dead.session.token);
    const ip = { "CF-Connecting-IP": "2001:db8:1:2::7" };
    const statuses: number[] = [];
    const send = async (response: Promise<Response>) => statuses.push((await response).status);
    await send(call("GET", "/auth/sessions", bearer(dead.session.token)));
    await send(call("GET", "/auth/sessions", bearer(`${session.token}!`)));
    await send(call("POST", "/auth/logout", deadCookie));
    await send(call("DELETE", "/auth/logout", deadCookie));
    await send(call("POST", "/auth/logout", { ...cookie, "Sec-Fetch-Site": "cross-site" }));
    await send(call("GET", "/auth/nowhere", { ...cookie, ...bearer(session.token) }));
    await send(call("GET", "/auth/logout", cookie));
    await send(call("GET", `/auth/${"x".repeat(9000)}`, bearer(session.token)));
    await insideOneLimiterWindow(8_000);
    for (let i = 0; i <= FAILURE_LIMIT; i++)
      await send(call("GET", "/auth/sessions", { ...bearer(dead.session.token), ...ip }));
    const overloaded = failingD1(await d1OfUser(userId), `D1_ERROR: D1 DB is overloaded. ${session.token}`);
    await send(callWith({ [binding]: overloaded }, "POST", "/auth/logout", cookie));
    // The user's bucket frozen for a move (src/db/moves.ts): writes answer 503 moving.
    const db = await d1OfUser(userId);
    const bucket = session.id.slice(0, -22);
    await db
      .prepare("INSERT INTO bucket_moves (bucket, state, binding, updated_at) VALUES (?, 'frozen', ?, ?)")
      .bind(bucket, binding, Date.now())
      .run();
    await send(call("POST", "/auth/logout", cookie));
    await db.prepare("DELETE FROM bucket_moves WHERE bucket = ?").bind(bucket).run();
    await send(callWith({ SESSION_COOKIE_NAME: "session" }, "POST", "/auth/logout", cookie));
    const failing = failingD1(db, `D1_ERROR: ${allSecrets.join(" ")}`);
    await send(callWith({ [binding]: failing }, "DELETE", "/auth/logout", cookie));
    expect([...new Set(statuses)]).toEqual([401, 400, 403, 404, 405, 414, 429, 503, 500]);
    expect(lines.length).toBeGreaterThan(0);
    expectNoSecret(lines, allSecrets);
    expect(await isLive(session.token)).toBe(true);
  }, 20_000);
});
