import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/queries.ts";
import worker from "../src/index.ts";
import { issueSession } from "../src/issue-session.ts";
import type { SessionEventMessage } from "../src/outbox.ts";
import { purge } from "../src/scheduled.ts";
import { SessionService } from "../src/session-service.ts";
import { endSessionsOfUser } from "../src/user-sessions.ts";
import { countingD1 } from "./d1.ts";
import { bearer, callWith, issue, newUser, randomIp } from "./helpers.ts";

// The optional SESSION_EVENTS queue, with the pool's real queue: test/workers/events-consumer.js
// consumes it. Every event is delivered at least once, with its id; what a failed send leaves
// pending, the cron sends again.

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

async function pendingOf(userId: string): Promise<number[]> {
  const { results } = await env.DB.prepare(
    "SELECT id FROM session_events WHERE user_id = ? AND pending_delivery = 1 ORDER BY id",
  )
    .bind(userId)
    .all<{ id: number }>();
  return results.map((row) => row.id);
}

const failingQueue = {
  send: () => Promise.reject(new Error("queue unavailable")),
  sendBatch: () => Promise.reject(new Error("queue unavailable")),
} as unknown as Queue;

describe("events queue (SESSION_EVENTS)", () => {
  it("delivers every event of a request after its answer, with its id, and marks it delivered", async () => {
    const userId = newUser();
    const db = openDatabase(env.DB);
    const config = readConfig(env);
    const created: { id: string }[] = [];
    // Sessions issued without the queue: nothing pending, nothing sent.
    for (let i = 0; i < 3; i++) created.push(await issueSession(db, config, { userId }));
    expect(await pendingOf(userId)).toEqual([]);

    const counter = countingD1(env.DB);
    const ctx = createExecutionContext();
    const caller = await issue(userId);
    const response = await worker.fetch(
      new Request("https://sessions.example/auth/logout?scope=others", {
        method: "DELETE",
        headers: { ...bearer(caller.token), "CF-Connecting-IP": randomIp() },
      }),
      { ...env, ...withQueue, DB: counter.db },
      ctx,
    );
    expect(response.status).toBe(200);
    // The answer cost one round trip; marking the events delivered is one more, after it.
    expect(counter.roundTrips).toBe(1);
    await waitOnExecutionContext(ctx);
    expect(counter.roundTrips).toBe(2);

    const messages = await receivedFor(userId, 3);
    const { results } = await env.DB.prepare(
      "SELECT id, session_id FROM session_events WHERE user_id = ? AND type = 'logout_others' ORDER BY id",
    )
      .bind(userId)
      .all<{ id: number; session_id: string }>();
    expect(messages.map((m) => m.id).sort()).toEqual(results.map((r) => r.id).sort());
    expect(messages.map((m) => m.sessionId).sort()).toEqual(created.map((s) => s.id).sort());
    expect(messages[0]).toEqual({
      id: expect.any(Number),
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
    expect(messages.map((m) => m.id).sort()).toEqual(pending);
    expect(messages.every((m) => m.type === "logout_all")).toBe(true);
  });

  it("a crash between the commit and the send loses nothing: the cron sends what was never sent", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 22, 13);
    vi.setSystemTime(start);
    const userId = newUser();
    const db = openDatabase(env.DB);
    const lost = { publish: () => {} };
    const created = await issueSession(db, readConfig(env), { userId, userAgent: "curl/8.5.0" }, lost);
    const { ended } = await endSessionsOfUser(db, readConfig(env), { userId, reason: "account_disabled" }, lost);
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
    const messages = (await receivedFor(userId, 2)).sort((a, b) => a.id - b.id);
    expect(messages.map((m) => [m.type, m.sessionId, m.newDevice, m.reason])).toEqual([
      ["created", created.id, true, null],
      ["ended", created.id, null, "admin"],
    ]);
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
