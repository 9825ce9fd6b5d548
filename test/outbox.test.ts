import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { wrapD1 } from "../src/db/d1.ts";
import { firstEventId } from "../src/db/schema.ts";
import { openShards } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import worker from "../src/index.ts";
import { InternalError, SessionService } from "../src/rpc/session-service.ts";
import type { SessionEventMessage } from "../src/services/event-message.ts";
import { issueSession } from "../src/services/issue-session.ts";
import { purge } from "../src/services/purge.ts";
import { sawStreams } from "../src/services/ssf/live-streams.ts";
import { endUserSessions as endSessionsOfUser } from "../src/services/user-sessions.ts";
import { countingShards } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  callWith,
  d1,
  d1OfUser,
  databases,
  FIREFOX_LINUX,
  issue,
  newUser,
  newUserOn,
  randomIp,
  scopeWith,
  sessionCookie,
  sessionIdsOf,
  shardBindings,
} from "./helpers.ts";
import { transmitter } from "./ssf.ts";

// The optional SESSION_EVENTS queue, with the pool's real queue: test/workers/events-consumer.js
// consumes it. Every event is delivered at least once, with an id of its own across every
// database; what a failed send leaves pending, the cron sends again, under the same id.

afterEach(() => {
  vi.useRealTimers();
});

const withQueue = { SESSION_EVENTS: env.TEST_EVENTS_QUEUE } as Partial<Env>;

async function received(): Promise<SessionEventMessage[]> {
  const list = (await (await env.EVENTS_CONSUMER.fetch("https://consumer/")).json()) as { body: SessionEventMessage }[];
  return list.map((message) => message.body);
}

async function receivedFor(userId: string, count: number): Promise<SessionEventMessage[]> {
  return vi.waitUntil(
    async () => {
      const mine = (await received()).filter((message) => message.userId === userId);
      return mine.length >= count ? mine : undefined;
    },
    { timeout: 5000, interval: 20 },
  );
}

/** The ids a consumer must see for the user's events, as the table gives them. */
const MESSAGE_ID = "request_id || ':' || session_id";

/** The message ids of the user's events still pending, in the order they were logged. */
async function pendingOf(userId: string): Promise<string[]> {
  const { results } = await (await d1OfUser(userId))
    .prepare(`SELECT ${MESSAGE_ID} AS id FROM session_events WHERE user_id = ? AND pending_delivery = 1 ORDER BY id`)
    .bind(userId)
    .all<{ id: string }>();
  return results.map((row) => row.id);
}

const failingQueue = {
  send: () => Promise.reject(new Error("queue unavailable")),
  sendBatch: () => Promise.reject(new Error("queue unavailable")),
} as unknown as Queue;

describe("events queue (SESSION_EVENTS)", () => {
  it("delivers every event of a request after its answer, with its id, and marks it delivered", async () => {
    const userId = newUser();
    const shards = openShards(env);
    const config = readConfig(env);
    const created: { id: string }[] = [];
    // Sessions issued without the queue: nothing pending, nothing sent.
    for (let i = 0; i < 3; i++) created.push(await issueSession(scopeWith(shards, config), { userId }));
    expect(await pendingOf(userId)).toEqual([]);

    const counter = countingShards(databases());
    const own = await bindingOfUser(userId);
    const ctx = createExecutionContext();
    const caller = await issue(userId);
    const response = await worker.fetch(
      new Request("https://sessions.example/auth/logout?scope=others", {
        method: "DELETE",
        headers: { ...bearer(caller.token), "CF-Connecting-IP": randomIp(), "User-Agent": CHROME_MAC },
      }),
      { ...env, ...withQueue, ...counter.env },
      ctx,
    );
    expect(response.status).toBe(200);
    // The answer cost one round trip; marking the events delivered is one more, after it,
    // on the same database.
    expect(counter.roundTrips()).toEqual({ [own]: 1 });
    await waitOnExecutionContext(ctx);
    expect(counter.roundTrips()).toEqual({ [own]: 2 });

    const messages = await receivedFor(userId, 3);
    const { results } = await (await d1OfUser(userId))
      .prepare(`SELECT ${MESSAGE_ID} AS id FROM session_events WHERE user_id = ? AND type = 'logout_others'`)
      .bind(userId)
      .all<{ id: string }>();
    expect(messages.map((m) => m.id).sort()).toEqual(results.map((r) => r.id).sort());
    expect(messages.map((m) => m.sessionId).sort()).toEqual(created.map((s) => s.id).sort());
    expect(messages[0]).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}:[A-Za-z0-9_-]{24,26}$/),
      type: "logout_others",
      userId,
      sessionId: expect.any(String),
      actorSessionId: caller.id,
      ipAddress: expect.any(String),
      reason: null,
      newDevice: null,
      createdAt: expect.stringMatching(/Z$/),
    });
    expect(await pendingOf(userId)).toEqual([]);
  });

  it("a failed send leaves the events pending, and the cron delivers them", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 22, 12);
    vi.setSystemTime(start);
    const userId = newUser();
    const caller = await issue(userId);
    await issue(userId);
    const response = await callWith({ SESSION_EVENTS: failingQueue } as Partial<Env>, "DELETE", "/auth/logout", {
      ...bearer(caller.token),
    });
    // The answer is unaffected: the sessions ended, and said so.
    expect(response.status).toBe(200);
    const pending = await pendingOf(userId);
    expect(pending).toHaveLength(2);

    // Within a minute the cron leaves them to the request path; after it, it sends them.
    await purge({ ...env, ...withQueue });
    expect(await pendingOf(userId)).toEqual(pending);
    vi.setSystemTime(start + 60_000);
    // A cron run whose queue is down too changes nothing.
    await purge({ ...env, SESSION_EVENTS: failingQueue } as Env);
    expect(await pendingOf(userId)).toEqual(pending);
    const result = await purge({ ...env, ...withQueue });
    expect(result.resent).toBeGreaterThanOrEqual(2);
    expect(await pendingOf(userId)).toEqual([]);
    const messages = await receivedFor(userId, 2);
    expect(messages.map((m) => m.id).sort()).toEqual([...pending].sort());
    expect(messages.every((m) => m.type === "logout_all")).toBe(true);
  });

  it("a crash between the commit and the send loses nothing: the cron sends what was never sent", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 22, 13);
    vi.setSystemTime(start);
    const userId = newUser();
    const shards = openShards(env);
    const lost = { pending: true, publish: () => {} };
    const created = await issueSession(scopeWith(shards, readConfig(env), lost), { userId, userAgent: "curl/8.5.0" });
    const { ended } = await endSessionsOfUser(scopeWith(shards, readConfig(env), lost), {
      userId,
      reason: "account_disabled",
    });
    expect(ended).toBe(1);
    expect(await pendingOf(userId)).toHaveLength(2);
    vi.setSystemTime(start + 61_000);
    await purge({ ...env, ...withQueue });
    const messages = await receivedFor(userId, 2);
    expect(messages.map(({ id: _id, createdAt: _at, ...m }) => m)).toEqual([
      {
        type: "created",
        userId,
        sessionId: created.id,
        actorSessionId: null,
        ipAddress: null,
        reason: null,
        newDevice: true,
      },
      {
        type: "ended",
        userId,
        sessionId: created.id,
        actorSessionId: null,
        ipAddress: null,
        reason: "account_disabled",
        newDevice: null,
      },
    ]);
    expect(await pendingOf(userId)).toEqual([]);
  });

  it("SessionService sends its events after answering too (this.ctx.waitUntil)", async () => {
    const userId = newUser();
    const ctx = createExecutionContext();
    const service = new SessionService(ctx, { ...env, ...withQueue } as Env);
    const created = await service.create({ userId, userAgent: "curl/8.5.0", country: "DE" });
    expect(await service.endSession({ sessionId: created.id, reason: "admin" })).toEqual({ ended: true });
    await waitOnExecutionContext(ctx);
    // Two calls, two sends: they may arrive in either order.
    // "created" sorts before "ended".
    const messages = (await receivedFor(userId, 2)).sort((a, b) => a.type.localeCompare(b.type));
    expect(messages.map((m) => [m.type, m.sessionId, m.newDevice, m.reason])).toEqual([
      ["created", created.id, true, null],
      ["ended", created.id, null, "admin"],
    ]);
    expect(await pendingOf(userId)).toEqual([]);
  });

  it("a re-authentication is sent as a reauthenticated event of the same session", async () => {
    const userId = newUser();
    const ctx = createExecutionContext();
    const service = new SessionService(ctx, { ...env, ...withQueue } as Env);
    const created = await service.create({ userId, userAgent: "curl/8.5.0" });
    expect(await service.reauthenticate({ token: created.token, factors: ["otp"] })).not.toBeNull();
    await waitOnExecutionContext(ctx);
    const messages = (await receivedFor(userId, 2)).sort((a, b) => a.type.localeCompare(b.type));
    expect(messages.map((m) => [m.type, m.sessionId, m.actorSessionId])).toEqual([
      ["created", created.id, null],
      ["reauthenticated", created.id, created.id],
    ]);
    expect(await pendingOf(userId)).toEqual([]);
  });

  it("an event sent again keeps its id, so a consumer can drop the duplicate", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 22, 14);
    vi.setSystemTime(start);
    vi.spyOn(console, "error").mockImplementation(() => {});
    const userId = newUser();
    const binding = await bindingOfUser(userId);
    const caller = await issue(userId);
    await issue(userId);
    // The queue accepts the events, but marking them delivered fails: they stay pending.
    let calls = 0;
    const markFails = wrapD1(d1(binding), (call) =>
      ++calls === 1 ? call() : Promise.reject(new Error("D1_ERROR: no such table: session_events")),
    );
    const ctx = createExecutionContext();
    const response = await worker.fetch(
      new Request("https://sessions.example/auth/logout", {
        method: "DELETE",
        headers: { ...bearer(caller.token), "CF-Connecting-IP": randomIp(), "User-Agent": CHROME_MAC },
      }),
      { ...env, ...withQueue, [binding]: markFails },
      ctx,
    );
    expect(response.status).toBe(200);
    await waitOnExecutionContext(ctx);
    const pending = await pendingOf(userId);
    expect(pending).toHaveLength(2);
    expect((await receivedFor(userId, 2)).map((m) => m.id).sort()).toEqual([...pending].sort());

    vi.setSystemTime(start + 61_000);
    await purge({ ...env, ...withQueue });
    expect(await pendingOf(userId)).toEqual([]);
    // Each event twice, under the same id both times.
    const messages = await receivedFor(userId, 4);
    expect(messages.map((m) => m.id).sort()).toEqual([...pending, ...pending].sort());
  });

  it.skipIf(shardBindings().length === 1)(
    "two events with the same row id in two databases are two messages with two ids",
    async () => {
      const [first, last] = [shardBindings()[0] as string, shardBindings().at(-1) as string];
      const users = [await newUserOn(first), await newUserOn(last)];
      // Row ids are per database: make both databases hand out the same next one (a minute
      // ahead of the clock, so above the ids of this millisecond: src/db/schema.ts).
      const next = firstEventId(Date.now() + 60_000) + Math.floor(Math.random() * 1000);
      for (const binding of [first, last]) {
        await d1(binding)
          .prepare(
            "INSERT INTO session_events (id, user_id, type, session_id, created_at, request_id, device_key) VALUES (?, 'padding', 'created', 'padding', 0, 'padding', '||')",
          )
          .bind(next - 1)
          .run();
      }
      const service = new SessionService(createExecutionContext(), { ...env, ...withQueue } as Env);
      const created = [];
      for (const userId of users) created.push(await service.create({ userId }));
      const rowIds = [];
      for (const [index, userId] of users.entries()) {
        const { results } = await (await d1OfUser(userId))
          .prepare("SELECT id FROM session_events WHERE user_id = ?")
          .bind(userId)
          .all<{ id: number }>();
        rowIds.push(results.map((row) => row.id));
        const [message] = await receivedFor(userId, 1);
        expect(message).toMatchObject({ type: "created", sessionId: created[index]?.id });
      }
      expect(rowIds).toEqual([[next], [next]]);
      const ids = [];
      for (const userId of users) ids.push(...(await receivedFor(userId, 1)).map((m) => m.id));
      expect(new Set(ids).size).toBe(2);
    },
  );

  it("the cron's resend stays within the run's budget, and the next run sends the rest", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 22, 15);
    vi.setSystemTime(start);
    const userId = newUser();
    // 150 events left pending (as if every send had failed), one write each.
    await (await d1OfUser(userId))
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150)
         INSERT INTO session_events (user_id, type, session_id, created_at, request_id, device_key, pending_delivery)
         SELECT ?, 'created', 'backlog-' || i, ?, 'write-' || i, '||', 1 FROM n`,
      )
      .bind(userId, start)
      .run();
    vi.setSystemTime(start + 61_000);
    // Starting at the user's database, with room for one batch (select + mark, each maybe retried).
    const first = shardBindings().indexOf(await bindingOfUser(userId));
    const tight = await purge({ ...env, ...withQueue }, { subrequests: 5, milliseconds: 60_000 }, first);
    // One resend batch (2 calls); the purge gets what is left (2 calls), never past the 5.
    expect(tight).toMatchObject({ resent: 100, subrequests: 4 });
    expect(await pendingOf(userId)).toHaveLength(50);
    const rest = await purge({ ...env, ...withQueue }, undefined, first);
    expect(rest.resent).toBeGreaterThanOrEqual(50);
    expect(await pendingOf(userId)).toEqual([]);
    const messages = await receivedFor(userId, 150);
    expect(new Set(messages.map((m) => m.id)).size).toBe(150);
  });

  it("a context change is delivered with where the session was and where it is now", async () => {
    const userId = newUser();
    const session = await issue(userId, { country: "DE", asn: 3320, carrier: "cookie" });
    const headers = { ...sessionCookie(session.token), "User-Agent": FIREFOX_LINUX };
    const response = await callWith(withQueue, "GET", "/auth/sessions", headers, undefined, {
      country: "DE",
      asn: 3320,
    });
    expect(response.status).toBe(401);
    const [message] = await receivedFor(userId, 1);
    expect(message).toMatchObject({
      type: "context_changed",
      sessionId: session.id,
      actorSessionId: session.id,
      context: {
        before: { browser: "Chrome", os: "macOS", country: "DE", asn: 3320 },
        after: { browser: "Firefox", os: "Linux", country: "DE", asn: 3320 },
      },
    });
    expect(await pendingOf(userId)).toEqual([]);
  });

  it("without the binding nothing is pending, nothing is sent, and the cron sends nothing", async () => {
    const userId = newUser();
    const caller = await issue(userId);
    await issue(userId);
    expect((await callWith({}, "DELETE", "/auth/logout", bearer(caller.token))).status).toBe(200);
    expect(await pendingOf(userId)).toEqual([]);
    expect((await purge(env)).resent).toBe(0);
    expect((await received()).filter((m) => m.userId === userId)).toEqual([]);
  });
});

describe("which upstreams take pushes, asked as a call opens its outbox", () => {
  it("a bug reading them is the call's failure, with its one line; only a refused var is taken for yes", async () => {
    // Asked only while no stream is live (src/services/ssf/live-streams.ts). A refused
    // SSF_UPSTREAM_AUTHORIZATIONS answers the call, its events pending
    // (test/upstream-sign-outs.test.ts); any other error must not be taken for one.
    sawStreams(false);
    const lines: string[] = [];
    for (const level of ["log", "warn", "error"] as const)
      vi.spyOn(console, level).mockImplementation((line: unknown) => void lines.push(String(line)));
    try {
      const bindings = { ...env, ...(await transmitter()).vars } as Env;
      Object.defineProperty(bindings, "SSF_UPSTREAM_AUTHORIZATIONS", {
        get: () => {
          throw new TypeError("Cannot read properties of undefined (reading 'x')");
        },
      });
      const userId = newUser();
      const service = new SessionService(createExecutionContext(), bindings);
      await expect(service.create({ userId })).rejects.toBeInstanceOf(InternalError);
      expect(lines.map((line) => JSON.parse(line))).toEqual([
        {
          level: "error",
          event: "unhandled_error",
          name: "TypeError",
          message: "Cannot read properties of undefined (reading [redacted])",
          rpc: "create",
          binding: null,
          request_id: expect.any(String),
        },
      ]);
      expect(await sessionIdsOf(userId)).toEqual([]);
    } finally {
      vi.restoreAllMocks();
      sawStreams(true);
    }
  });
});
