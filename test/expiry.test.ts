import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../src/index.ts";
import { PURGE_BATCH_SIZE, PURGE_MAX_BATCHES } from "../src/scheduled.ts";
import { bearer, call, isLive, issue, newUser, sessionIdsOf } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("expiry", () => {
  it("a session authenticates until the millisecond before expires_at, never at it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = new Date("2026-11-22T10:00:00.000Z").getTime();
    vi.setSystemTime(start);
    const user = newUser();
    const session = await issue(user, { ttlSeconds: 60 });
    const longer = await issue(user, { ttlSeconds: 120 });

    vi.setSystemTime(start + 59_999);
    expect((await call("GET", "/auth/sessions", bearer(session.token))).status).toBe(200);
    expect(await isLive(session.token)).toBe(true);

    vi.setSystemTime(start + 60_000);
    expect((await call("GET", "/auth/sessions", bearer(session.token))).status).toBe(401);
    expect(await isLive(session.token)).toBe(false);
    const listed = (await (await call("GET", "/auth/sessions", bearer(longer.token))).json()) as {
      sessions: { id: string }[];
    };
    expect(listed.sessions.map((s) => s.id)).toEqual([longer.id]);
  });
});

async function runCron(at: number): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime: at, cron: "17 * * * *" }), env, ctx);
  await waitOnExecutionContext(ctx);
}

async function insertExpired(userId: string, count: number, expiresAt: number): Promise<void> {
  const statement = env.DB.prepare(
    `INSERT INTO sessions (id, secret_hash, user_id, user_agent, device_type, created_at, expires_at, last_active_at)
     VALUES (?, ?, ?, '', 'unknown', ?, ?, ?)`,
  );
  const rows = Array.from({ length: count }, (_, i) =>
    statement.bind(`${userId}-${i}`, "0".repeat(64), userId, expiresAt - 1000, expiresAt, expiresAt - 1000),
  );
  for (let i = 0; i < rows.length; i += 500) await env.DB.batch(rows.slice(i, i + 500));
}

describe("scheduled purge", () => {
  it("is wired to a cron trigger and deletes expired rows only", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = new Date("2026-11-22T12:00:00.000Z").getTime();
    vi.setSystemTime(start);
    const user = newUser();
    const live = await issue(user, { ttlSeconds: 3600 });
    const dying = await issue(user, { ttlSeconds: 60 });
    vi.setSystemTime(start + 60_000);
    await runCron(start + 60_000);
    expect(await sessionIdsOf(user)).toEqual([live.id]);
    expect(await isLive(live.token)).toBe(true);
    expect(dying.id).not.toBe(live.id);
  });

  it("works in bounded batches: one run removes at most batch size × batches", async () => {
    const cap = PURGE_BATCH_SIZE * PURGE_MAX_BATCHES;
    const user = newUser();
    const past = Date.now() - 1000;
    await insertExpired(user, cap + 7, past);
    await runCron(Date.now());
    expect(await sessionIdsOf(user)).toHaveLength(7);
    await runCron(Date.now());
    expect(await sessionIdsOf(user)).toHaveLength(0);
  });
});
