import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { firstEventId } from "../src/db/schema.ts";
import worker from "../src/index.ts";
import { PURGE_BATCH_SIZE, purge } from "../src/services/purge.ts";
import { countingShards, failingD1 } from "./d1.ts";
import {
  bearer,
  call,
  d1OfUser,
  databases,
  isLive,
  issue,
  newUser,
  newUserOn,
  sessionIdsOf,
  shardBindings,
} from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
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

/** Dead rows straight into the user's database: `count` expired sessions and old events. */
async function insertDead(userId: string, count: number, expiresAt: number): Promise<void> {
  const db = await d1OfUser(userId);
  const session = db.prepare(
    `INSERT INTO sessions (id, secret_hash, user_id, user_agent, device_type, created_at, expires_at, last_active_at, ttl_seconds, device_key, authenticated_at)
     VALUES (?1, ?2, ?3, '', 'unknown', ?4, ?5, ?4, 1, '||', ?4)`,
  );
  // Each event with the id the service gives one logged at its time (src/db/schema.ts).
  const event = db.prepare(
    "INSERT INTO session_events (id, user_id, type, session_id, ip_address, created_at, request_id, device_key) VALUES (?, ?, 'created', ?, NULL, ?, 'dead', '||')",
  );
  const longAgo = expiresAt - 91 * 86_400_000;
  const rows = Array.from({ length: count }, (_, i) => [
    session.bind(`${userId}-${i}`, "0".repeat(64), userId, expiresAt - 1000, expiresAt),
    event.bind(firstEventId(longAgo) + i, userId, `${userId}-${i}`, longAgo),
  ]).flat();
  for (let i = 0; i < rows.length; i += 500) await db.batch(rows.slice(i, i + 500));
}

async function eventCount(userId: string): Promise<number> {
  const row = await (await d1OfUser(userId))
    .prepare("SELECT COUNT(*) AS n FROM session_events WHERE user_id = ?")
    .bind(userId)
    .first<{ n: number }>();
  return row?.n ?? 0;
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

  it("removes a session one second past its expiry and keeps one a second short of it; an idle one goes when it expires", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const run = new Date("2026-11-23T12:00:00.000Z").getTime();
    const idleTimeout = 1_209_600_000;
    const user = newUser();
    vi.setSystemTime(run - idleTimeout - 1000);
    const idle = await issue(user, { ttlSeconds: idleTimeout / 1000 + 2 });
    vi.setSystemTime(run - idleTimeout + 1000);
    const idleAlmost = await issue(user);
    vi.setSystemTime(run - 59_000);
    const expiringSoon = await issue(user, { ttlSeconds: 60 });
    await issue(user, { ttlSeconds: 58 });
    vi.setSystemTime(run);
    await runCron(run);
    // Idle for a second too long: refused and unlisted at once, its row kept until it expires.
    expect(await isLive(idle.token)).toBe(false);
    expect(await sessionIdsOf(user)).toEqual([idle.id, idleAlmost.id, expiringSoon.id].sort());
    expect(await isLive(idleAlmost.token)).toBe(true);
    expect(await isLive(expiringSoon.token)).toBe(true);
    // Both expire now.
    vi.setSystemTime(run + 1000);
    await runCron(run + 1000);
    expect(await sessionIdsOf(user)).toEqual([idleAlmost.id]);
  });

  it("keeps going while batches come back full: one run clears a backlog of many batches", async () => {
    const user = newUser();
    await insertDead(user, PURGE_BATCH_SIZE * 3 + 7, Date.now() - 1000);
    await runCron(Date.now());
    expect(await sessionIdsOf(user)).toEqual([]);
    expect(await eventCount(user)).toBe(0);
  });

  it("a failing database does not stop the run for the others, and is named in its log line", async () => {
    const users = await Promise.all(shardBindings().map((binding) => newUserOn(binding)));
    for (const user of users) await insertDead(user, 3, Date.now() - 1000);
    const broken = shardBindings()[0] as string;
    const logged: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void logged.push(String(line)));
    const result = await purge({
      ...env,
      [broken]: failingD1(
        databases()[broken] as D1Database,
        "D1_ERROR: D1 DB is overloaded. Too many requests queued.",
      ),
    });
    expect(result).toMatchObject({ complete: false, failed: [broken], sessions: 3 * (users.length - 1) });
    expect(JSON.parse(logged.at(-1) as string)).toMatchObject({ level: "warn", event: "purge", failed: [broken] });
    for (const [index, user] of users.entries()) expect(await sessionIdsOf(user)).toHaveLength(index === 0 ? 3 : 0);
    // The next run, with the database back, finishes it.
    expect(await purge(env)).toMatchObject({ complete: true, failed: [], sessions: 3 });
    expect(await sessionIdsOf(users[0] as string)).toEqual([]);
  });

  it("a backlog on every database drains over successive runs, each within its subrequest budget", async () => {
    // Room for a last run that finds all three tables short on all four databases (12 calls).
    const budget = { subrequests: 16, milliseconds: 60_000 };
    const users = await Promise.all(shardBindings().map((binding) => newUserOn(binding)));
    const live = [];
    for (const user of users) {
      await insertDead(user, PURGE_BATCH_SIZE * 2 + 3, Date.now() - 1000);
      live.push(await issue(user));
    }
    vi.spyOn(console, "log").mockImplementation(() => {});
    const runs = [];
    for (let run = 0; run < 20; run++) {
      const counter = countingShards(databases());
      const result = await purge({ ...env, ...counter.env }, budget, run);
      const perBinding = Object.values(counter.roundTrips());
      expect(perBinding.reduce((sum, n) => sum + n, 0)).toBe(result.subrequests);
      expect(result.subrequests).toBeLessThanOrEqual(budget.subrequests);
      runs.push(result);
      if (result.complete) break;
    }
    // Every database needs 7 calls (500, 500, 3 rows of sessions and of events; none of SETs
    // received): within one run's 16 at one database, over several runs at four.
    expect(runs.at(-1)?.complete).toBe(true);
    if (users.length === 1) expect(runs).toHaveLength(1);
    else expect(runs.length).toBeGreaterThan(1);
    expect(runs.reduce((sum, run) => sum + run.sessions, 0)).toBe(users.length * (PURGE_BATCH_SIZE * 2 + 3));
    expect(runs.reduce((sum, run) => sum + run.events, 0)).toBe(users.length * (PURGE_BATCH_SIZE * 2 + 3));
    for (const [index, user] of users.entries()) {
      expect(await sessionIdsOf(user)).toEqual([live[index]?.id]);
      expect(await eventCount(user)).toBe(1);
    }
  });
});
