import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { firstEventId } from "../src/db/schema.ts";
import { newAdminKey } from "../src/domain/admin-keys.ts";
import { readConfig } from "../src/domain/config.ts";
import { RANDOM_LENGTH } from "../src/domain/token.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import type { SessionEventMessage } from "../src/services/event-message.ts";
import { countingShards } from "./d1.ts";
import {
  bearer,
  CHALLENGE,
  CHROME_MAC,
  call,
  callWith,
  d1OfUser,
  databases,
  expectError,
  expectSecurityHeaders,
  FIREFOX_WINDOWS,
  isLive,
  issue,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
  sessionIdsOf,
  tableSnapshot,
} from "./helpers.ts";

// "Was this you?": a new device's sign-in comes with a report token; with it alone the user sees
// the sign-in (GET /auth/report, which changes nothing) and ends it (POST, once).

afterEach(() => {
  vi.useRealTimers();
});

/** A user signed in on their Mac, then a stranger on Windows from Nigeria: a new device. */
async function strangerSignIn() {
  const userId = newUser();
  const own = await issue(userId, { country: "DE", city: "Berlin" });
  const stranger = await issue(userId, {
    userAgent: FIREFOX_WINDOWS,
    ipAddress: "198.51.100.9",
    country: "NG",
    city: "Lagos",
  });
  expect(stranger.newDevice).toBe(true);
  return { userId, own, stranger, reportToken: stranger.reportToken as string };
}

/** Every session row and event, to assert that a refusal changed nothing. */
async function everything(): Promise<unknown[][]> {
  return [await tableSnapshot("sessions"), await tableSnapshot("session_events")];
}

describe("create", () => {
  it("gives a report token only to a new device's sign-in, naming its session, never a session token", async () => {
    const userId = newUser();
    const first = await issue(userId);
    expect(first.newDevice).toBe(true);
    expect(first.reportToken).toMatch(new RegExp(`^${first.id}~[A-Za-z0-9_-]{43}$`));
    const again = await issue(userId);
    expect(again.newDevice).toBe(false);
    expect(again).not.toHaveProperty("reportToken");
    // Stored only as its hash: the row and the event never hold the secret.
    const secret = (first.reportToken as string).split("~")[1] as string;
    expect(JSON.stringify(await everything())).not.toContain(secret);
  });

  it("the admin API answers it too, for a new device only", async () => {
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const vars = { ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>;
    const userId = newUser();
    const create = () =>
      callWith(
        vars,
        "POST",
        "/admin/sessions",
        { ...bearer(key), "Content-Type": "application/json" },
        JSON.stringify({ userId }),
      );
    const first = (await (await create()).json()) as { id: string; newDevice: boolean; reportToken?: string };
    expect(first.newDevice).toBe(true);
    expect(first.reportToken).toMatch(new RegExp(`^${first.id}~`));
    const again = (await (await create()).json()) as Record<string, unknown>;
    expect(again.newDevice).toBe(false);
    expect(again).not.toHaveProperty("reportToken");
  });
});

describe("GET /auth/report", () => {
  it("shows the sign-in, and changes nothing however often it is fetched (a mail scanner)", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    const before = await everything();
    for (let i = 0; i < 5; i++) {
      const response = await call("GET", "/auth/report", bearer(reportToken));
      expect(response.status).toBe(200);
      expect(response.headers.get("Cache-Control")).toBe("no-store");
      expectSecurityHeaders(response);
      expect(await response.json()).toEqual({
        session_id: stranger.id,
        name: "Firefox 133 on Windows · 198.51.100.9",
        ip_address: "198.51.100.9",
        location: "Lagos, NG",
        device: { browser: "Firefox 133", os: "Windows", type: "desktop" },
        created_at: expect.any(String),
        last_active_at: expect.any(String),
      });
    }
    expect(await everything()).toEqual(before);
    expect(await isLive(stranger.token)).toBe(true);
  });
});

describe("POST /auth/report", () => {
  it("ends that session at once, logged ended reported_by_user; the user's own stays; a second click is 410", async () => {
    const { userId, own, stranger, reportToken } = await strangerSignIn();
    const response = await call("POST", "/auth/report", bearer(reportToken));
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { ended: true, next_steps: ["change_password", "review_devices"] },
    });
    expect(response.headers.get("Cache-Control")).toBe("no-store");
    // The dead-token answer on the stranger's next request.
    await expectError(await call("GET", "/auth/whoami", bearer(stranger.token)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    expect(await sessionIdsOf(userId)).toEqual([own.id]);
    const log = (await (await call("GET", "/auth/events", bearer(own.token))).json()) as {
      events: Record<string, unknown>[];
    };
    expect(log.events[0]).toMatchObject({
      type: "ended",
      session_id: stranger.id,
      reason: "reported_by_user",
      actor_session_id: null,
    });
    // The security log never shows the report token or its hash.
    expect(JSON.stringify(log)).not.toContain(reportToken.split("~")[1]);
    expect(JSON.stringify(log)).not.toContain("report_hash");

    const before = await everything();
    await expectError(await call("POST", "/auth/report", bearer(reportToken)), 410, "report_used");
    await expectError(await call("GET", "/auth/report", bearer(reportToken)), 410, "report_used");
    expect(await everything()).toEqual(before);
  });

  it("a session that ended some other way: 410 session_ended, nothing ended", async () => {
    const { own, stranger, reportToken } = await strangerSignIn();
    // The user found it on their devices page first.
    expect((await call("DELETE", `/auth/sessions/${stranger.id}`, bearer(own.token))).status).toBe(200);
    const before = await everything();
    await expectError(await call("GET", "/auth/report", bearer(reportToken)), 410, "session_ended");
    await expectError(await call("POST", "/auth/report", bearer(reportToken)), 410, "session_ended");
    expect(await everything()).toEqual(before);
    expect(await isLive(own.token)).toBe(true);
  });

  it("a session whose row is still there but expired by time: 410 session_ended, nothing ended", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    vi.setSystemTime(start);
    const userId = newUser();
    await issue(userId);
    const stranger = await issue(userId, { userAgent: FIREFOX_WINDOWS, ttlSeconds: 300 });
    vi.setSystemTime(start + 301_000);
    const before = await everything();
    expect(JSON.stringify(before)).toContain(stranger.id);
    await expectError(await call("GET", "/auth/report", bearer(stranger.reportToken as string)), 410, "session_ended");
    await expectError(await call("POST", "/auth/report", bearer(stranger.reportToken as string)), 410, "session_ended");
    expect(await everything()).toEqual(before);
  });

  it("a token older than SESSION_REPORT_TTL_SECONDS: 410 report_expired, live session or not, nothing ended", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    vi.setSystemTime(start);
    const { stranger, reportToken } = await strangerSignIn();
    vi.setSystemTime(start + readConfig(env).reportTtlSeconds * 1000);
    const before = await everything();
    await expectError(await call("GET", "/auth/report", bearer(reportToken)), 410, "report_expired");
    await expectError(await call("POST", "/auth/report", bearer(reportToken)), 410, "report_expired");
    expect(await everything()).toEqual(before);
    expect(await isLive(stranger.token)).toBe(true);
    // Once the session is gone too, the token still reads as expired, from its created event.
    await exports.SessionService.endSession({ sessionId: stranger.id, reason: "admin" });
    await expectError(await call("POST", "/auth/report", bearer(reportToken)), 410, "report_expired");
  });
});

describe("refused tokens: nothing read, nothing ended", () => {
  it("no token 401; malformed, unknown, forged or a session token 404; a cookie is never read", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    const [id, secret] = reportToken.split("~") as [string, string];
    const before = await everything();
    for (const method of ["GET", "POST"]) {
      await expectError(await call(method, "/auth/report"), 401, "token_required", { wwwAuthenticate: CHALLENGE });
      await expectError(await call(method, "/auth/report", sessionCookie(stranger.token)), 401, "token_required", {
        wwwAuthenticate: CHALLENGE,
      });
      await expectError(
        await call(method, "/auth/report", { Authorization: `Basic ${reportToken}` }),
        401,
        "token_required",
        {
          wwwAuthenticate: CHALLENGE,
        },
      );
      for (const token of [
        "x",
        `${id}~`,
        `${id}~${secret}x`,
        `${id}.${secret}`,
        // Another secret for the same session: forged.
        `${id}~${"A".repeat(43)}`,
        // The session's own token is no report token.
        stranger.token,
        // A report token naming a session that never was.
        `${id.slice(0, -4)}AAAA~${secret}`,
      ]) {
        await expectError(await call(method, "/auth/report", bearer(token)), 404, "report_not_found");
      }
    }
    expect(await everything()).toEqual(before);
    expect(await isLive(stranger.token)).toBe(true);
  });

  it("a forged token for a session that ended is still 404, not 410", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    expect((await call("POST", "/auth/report", bearer(reportToken))).status).toBe(200);
    const forged = `${stranger.id}~${"A".repeat(43)}`;
    await expectError(await call("POST", "/auth/report", bearer(forged)), 404, "report_not_found");
  });

  it("a report token is no session token: refused by authenticate, /auth/whoami, /auth/sessions", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    expect(await exports.SessionService.authenticate(reportToken)).toBeNull();
    for (const path of ["/auth/whoami", "/auth/sessions", "/auth/events"])
      await expectError(await call("GET", path, bearer(reportToken)), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
    await expectError(await call("GET", "/auth/whoami", sessionCookie(reportToken)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    expect(await isLive(stranger.token)).toBe(true);
  });

  it("each refusal counts against the client's failure limit, as every refused credential does", async () => {
    const counted: string[] = [];
    const limiter = {
      limit: async ({ key }: { key: string }) => {
        counted.push(key);
        return { success: false };
      },
    } as unknown as RateLimit;
    const { stranger } = await strangerSignIn();
    const before = await everything();
    const ip = { "CF-Connecting-IP": "192.0.2.77" };
    for (const [method, token] of [
      ["GET", "not-a-report-token"],
      ["POST", `${stranger.id}~${"A".repeat(43)}`],
    ] as const) {
      await expectError(
        await callWith({ AUTH_FAILURES: limiter }, method, "/auth/report", { ...bearer(token), ...ip }),
        429,
        "rate_limited",
        { retryAfter: "60" },
      );
    }
    expect(counted).toEqual(["192.0.2.77", "192.0.2.77"]);
    expect(await everything()).toEqual(before);
    expect(await isLive(stranger.token)).toBe(true);
  });
});

describe("cost and logs", () => {
  it("reading and confirming cost one round trip each, on the user's database", async () => {
    const { reportToken } = await strangerSignIn();
    for (const method of ["GET", "POST"]) {
      const counter = countingShards(databases());
      expect((await callWith(counter.env, method, "/auth/report", bearer(reportToken))).status).toBe(200);
      expect(Object.values(counter.roundTrips())).toEqual([1]);
    }
  });

  it("a used or forged token reads its one user's events, however many other users' events its bucket holds", async () => {
    const { userId, stranger, reportToken } = await strangerSignIn();
    expect((await call("POST", "/auth/report", bearer(reportToken))).status).toBe(200);
    const unused = `${stranger.id.slice(0, -RANDOM_LENGTH)}${"A".repeat(RANDOM_LENGTH)}~${"A".repeat(43)}`;
    const uses = [
      ["POST", reportToken],
      ["GET", reportToken],
      ["POST", `${stranger.id}~${"A".repeat(43)}`],
      ["GET", unused],
    ] as const;
    const rowsRead = async () => {
      const rows: number[] = [];
      for (const [method, token] of uses) {
        const counter = countingShards(databases());
        expect((await callWith(counter.env, method, "/auth/report", bearer(token))).status).toBeGreaterThan(400);
        rows.push(counter.rowsRead());
      }
      return rows;
    };
    const few = await rowsRead();
    // A thousand events of other users in the same bucket, on the same database, a day old
    // (their ids, as eventIds gives them, below every write's of this test).
    const dayAgo = Date.now() - 86_400_000;
    await (await d1OfUser(userId))
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
         INSERT INTO session_events (id, user_id, type, session_id, created_at, request_id, device_key)
         SELECT ? + i, 'crowd-' || i, 'created', ? || substr(? || i, -?), ?, 'crowd', '||' FROM n`,
      )
      .bind(
        firstEventId(dayAgo),
        stranger.id.slice(0, -RANDOM_LENGTH),
        "0".repeat(RANDOM_LENGTH),
        RANDOM_LENGTH,
        dayAgo,
      )
      .run();
    expect(await rowsRead()).toEqual(few);
  });

  it("every use writes one line, never the token", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
    const { stranger, reportToken } = await strangerSignIn();
    await call("GET", "/auth/report", bearer(reportToken));
    await call("POST", "/auth/report", bearer(reportToken));
    await call("POST", "/auth/report", bearer(reportToken));
    await call("GET", "/auth/report", bearer("garbage"));
    vi.restoreAllMocks();
    const uses = lines.map((line) => JSON.parse(line)).filter((line) => line.event === "session_report");
    expect(uses).toEqual([
      { level: "info", event: "session_report", action: "read", outcome: "shown", sessionId: stranger.id },
      { level: "info", event: "session_report", action: "confirm", outcome: "ended", sessionId: stranger.id },
      { level: "info", event: "session_report", action: "confirm", outcome: "used", sessionId: stranger.id },
      { level: "info", event: "session_report", action: "read", outcome: "unknown", sessionId: null },
    ]);
    expect(lines.join("\n")).not.toContain(reportToken.split("~")[1]);
  });
});

describe("the events queue", () => {
  it("the created message of a new device carries the report token; GET /auth/events never does", async () => {
    const userId = newUser();
    const ctx = createExecutionContext();
    const service = new SessionService(ctx, { ...env, SESSION_EVENTS: env.TEST_EVENTS_QUEUE } as Env);
    const created = await service.create({ userId, userAgent: CHROME_MAC });
    const again = await service.create({ userId, userAgent: CHROME_MAC });
    await waitOnExecutionContext(ctx);
    const messages = await vi.waitUntil(
      async () => {
        const list = (await (await env.EVENTS_CONSUMER.fetch("https://consumer/")).json()) as {
          body: SessionEventMessage;
        }[];
        const mine = list.map((m) => m.body).filter((m) => m.userId === userId);
        return mine.length >= 2 ? mine : undefined;
      },
      { timeout: 5000, interval: 20 },
    );
    const bySession = Object.fromEntries(messages.map((m) => [m.sessionId, m]));
    expect(bySession[created.id]).toMatchObject({ type: "created", newDevice: true, reportToken: created.reportToken });
    expect(bySession[again.id]).toMatchObject({ type: "created", newDevice: false });
    expect(bySession[again.id]).not.toHaveProperty("reportToken");
    const log = await (await call("GET", "/auth/events", bearer(created.token))).text();
    expect(log).not.toContain((created.reportToken as string).split("~")[1]);
  });
});

describe("the report token in the outbox", () => {
  it("a send that fails logs its line, never the token, even when the queue's error quotes the message", async () => {
    const lines: string[] = [];
    for (const method of ["log", "warn", "error"] as const)
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
    const queue = {
      sendBatch: async (batch: unknown) => {
        throw new Error(`queue refused ${JSON.stringify(batch)}`);
      },
    } as unknown as Queue;
    const ctx = createExecutionContext();
    const service = new SessionService(ctx, { ...env, SESSION_EVENTS: queue } as Env);
    const created = await service.create({ userId: newUser(), userAgent: CHROME_MAC });
    await waitOnExecutionContext(ctx);
    vi.restoreAllMocks();
    expect(lines.map((line) => JSON.parse(line).event)).toContain("outbox_send_failed");
    expect(lines.join("\n")).not.toContain((created.reportToken as string).split("~")[1]);
  });
});

describe("SESSION_REPORT_TTL_SECONDS", () => {
  it("a day by default; under a minute or past the events retention is refused", () => {
    expect(readConfig({ ...env, SESSION_REPORT_TTL_SECONDS: "" }).reportTtlSeconds).toBe(86_400);
    expect(readConfig({ ...env, SESSION_REPORT_TTL_SECONDS: "3600" }).reportTtlSeconds).toBe(3600);
    expect(() => readConfig({ ...env, SESSION_REPORT_TTL_SECONDS: "59" })).toThrow(
      "SESSION_REPORT_TTL_SECONDS must be an integer >= 60",
    );
    expect(() =>
      readConfig({ ...env, SESSION_EVENTS_RETENTION_DAYS: "1", SESSION_REPORT_TTL_SECONDS: "86401" }),
    ).toThrow("SESSION_REPORT_TTL_SECONDS must be <= SESSION_EVENTS_RETENTION_DAYS in seconds");
  });
});

describe("what the docs say of a report (docs/api.md, Report a sign-in)", () => {
  it("HEAD /auth/report answers GET's status and headers without a body, and changes nothing", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
    const { stranger, reportToken } = await strangerSignIn();
    const before = await everything();
    const head = await call("HEAD", "/auth/report", bearer(reportToken));
    expect({ status: head.status, type: head.headers.get("Content-Type"), body: await head.text() }).toEqual({
      status: 200,
      type: "application/json",
      body: "",
    });
    expect(head.headers.get("Cache-Control")).toBe("no-store");
    const refused = await call("HEAD", "/auth/report");
    expect({
      status: refused.status,
      challenge: refused.headers.get("WWW-Authenticate"),
      body: await refused.text(),
    }).toEqual({
      status: 401,
      challenge: CHALLENGE,
      body: "",
    });
    vi.restoreAllMocks();
    expect(await everything()).toEqual(before);
    expect(await isLive(stranger.token)).toBe(true);
    const uses = lines.map((line) => JSON.parse(line)).filter((line) => line.event === "session_report");
    expect(uses).toEqual([
      { level: "info", event: "session_report", action: "read", outcome: "shown", sessionId: stranger.id },
    ]);
  });

  it("the refusals' precedence: 401 token_required, 404 report_not_found, 410 report_used, report_expired, session_ended; 429 only past the failure limit", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    vi.setSystemTime(start);
    const used = await strangerSignIn();
    expect((await call("POST", "/auth/report", bearer(used.reportToken))).status).toBe(200);
    const endedElsewhere = await strangerSignIn();
    await exports.SessionService.endSession({ sessionId: endedElsewhere.stranger.id, reason: "admin" });
    const live = await strangerSignIn();
    const forgedForUsed = `${used.stranger.id}~${"A".repeat(43)}`;
    // Each refusal, before the TTL: a token that ended its session is used, however its session ended.
    await expectError(await call("POST", "/auth/report", bearer(forgedForUsed)), 404, "report_not_found");
    await expectError(await call("POST", "/auth/report", bearer(used.reportToken)), 410, "report_used");
    await expectError(await call("POST", "/auth/report", bearer(endedElsewhere.reportToken)), 410, "session_ended");
    // Past the TTL: used stays used; expired comes before session_ended, live session or not.
    vi.setSystemTime(start + readConfig(env).reportTtlSeconds * 1000);
    await expectError(await call("POST", "/auth/report", bearer(forgedForUsed)), 404, "report_not_found");
    await expectError(await call("POST", "/auth/report", bearer(used.reportToken)), 410, "report_used");
    await expectError(await call("POST", "/auth/report", bearer(endedElsewhere.reportToken)), 410, "report_expired");
    await expectError(await call("POST", "/auth/report", bearer(live.reportToken)), 410, "report_expired");
    // No token is 401 and never counted; any other refusal past the client's failure limit is 429.
    const spent = { AUTH_FAILURES: { limit: async () => ({ success: false }) } as unknown as RateLimit };
    await expectError(await callWith(spent, "POST", "/auth/report", {}), 401, "token_required", {
      wwwAuthenticate: CHALLENGE,
    });
    await expectError(await callWith(spent, "POST", "/auth/report", bearer(used.reportToken)), 429, "rate_limited", {
      retryAfter: "60",
    });
  });

  it("a valid token is carried out however spent the client's failure limit: only refusals are counted", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    const spent = { AUTH_FAILURES: { limit: async () => ({ success: false }) } as unknown as RateLimit };
    expect((await callWith(spent, "POST", "/auth/report", bearer(reportToken))).status).toBe(200);
    expect(await isLive(stranger.token)).toBe(false);
  });

  it("the token is a Bearer credential: a cross-site POST with it is carried out, as the page on another origin sends it", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    const crossSite = { Origin: "https://attacker.example", "Sec-Fetch-Site": "cross-site" };
    const response = await call("POST", "/auth/report", { ...bearer(reportToken), ...crossSite });
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { ended: true, next_steps: ["change_password", "review_devices"] },
    });
    expect(await isLive(stranger.token)).toBe(false);
  });

  it("the token outlives reauthenticate: it names the session, whose id a reauthentication keeps", async () => {
    const { stranger, reportToken } = await strangerSignIn();
    const renewed = await exports.SessionService.reauthenticate({ token: stranger.token, factors: ["pwd"] });
    expect(renewed?.sessionId).toBe(stranger.id);
    const shown = await call("GET", "/auth/report", bearer(reportToken));
    expect(((await shown.json()) as { session_id: string }).session_id).toBe(stranger.id);
    expect((await call("POST", "/auth/report", bearer(reportToken))).status).toBe(200);
    expect(await isLive(renewed?.token as string)).toBe(false);
  });
});
