import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openShards } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import { createSession as issueSession } from "../src/services/login-response.ts";
import { countingShards } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  call,
  callWith,
  d1OfUser,
  databases,
  FIREFOX_LINUX,
  isLive,
  issue,
  newUser,
  scopeWith,
  sessionIdsOf,
} from "./helpers.ts";

// The per-user cap (SESSION_MAX_PER_USER), the sliding lifetime (SESSION_SLIDING_TTL, capped by
// SESSION_MAX_LIFETIME_SECONDS) and the new-device flag of create.

afterEach(() => {
  vi.useRealTimers();
});

const MINUTE = 60_000;
const DAY = 86_400_000;
const START = Date.UTC(2026, 10, 1);

async function eventsOf(token: string) {
  const body = (await (await call("GET", "/auth/events", bearer(token))).json()) as {
    events: { type: string; session_id: string; actor_session_id: string | null; new_device: boolean | null }[];
  };
  return body.events;
}

describe("SESSION_MAX_PER_USER", () => {
  it("defaults to 50: the 51st session ends the least recently active, logged as evicted by the new one", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const sessions = [];
    for (let i = 0; i < 50; i++) {
      vi.setSystemTime(START + i);
      sessions.push(await issue(userId));
    }
    // The oldest is used again, so the second oldest is the least recently active.
    vi.setSystemTime(START + 10 * MINUTE);
    expect(await exports.SessionService.authenticate(sessions[0]!.token)).not.toBeNull();
    const newest = await issue(userId);
    expect(await sessionIdsOf(userId)).toHaveLength(50);
    expect(await isLive(sessions[1]!.token)).toBe(false);
    expect(await isLive(sessions[0]!.token)).toBe(true);
    expect(await isLive(newest.token)).toBe(true);
    const evicted = (await eventsOf(newest.token)).filter((e) => e.type === "evicted");
    expect(evicted).toEqual([expect.objectContaining({ session_id: sessions[1]!.id, actor_session_id: newest.id })]);
  });

  it("with a cap of 1, each new session ends the previous one, in the creation's one round trip", async () => {
    const config = { ...readConfig(env), maxPerUser: 1 };
    const userId = newUser();
    const first = await issueSession(scopeWith(openShards(env), config), { userId, userAgent: CHROME_MAC });
    const counter = countingShards(databases());
    const second = await issueSession(scopeWith(openShards({ ...env, ...counter.env }), config), {
      userId,
      userAgent: CHROME_MAC,
    });
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 1 });
    expect(await sessionIdsOf(userId)).toEqual([second.id]);
    expect(await isLive(first.token)).toBe(false);
    const types = (await eventsOf(second.token)).map((e) => [e.type, e.session_id]);
    expect(types).toEqual([
      ["evicted", first.id],
      ["created", second.id],
      ["created", first.id],
    ]);
  });

  it("counts only live sessions: expired ones are neither counted nor logged as evicted", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const config = { ...readConfig(env), maxPerUser: 2 };
    const shards = openShards(env);
    const userId = newUser();
    await issueSession(scopeWith(shards, config), { userId, ttlSeconds: 60 });
    const kept = await issueSession(scopeWith(shards, config), { userId });
    vi.setSystemTime(START + 2 * MINUTE);
    const latest = await issueSession(scopeWith(shards, config), { userId, userAgent: CHROME_MAC });
    expect(await isLive(kept.token)).toBe(true);
    expect(await isLive(latest.token)).toBe(true);
    expect((await eventsOf(latest.token)).filter((e) => e.type === "evicted")).toEqual([]);
  });

  it("refuses a cap below 1 in the configuration", () => {
    for (const value of ["0", "-1", "1.5", "many"]) {
      expect(() => readConfig({ ...env, SESSION_MAX_PER_USER: value })).toThrow(
        "SESSION_MAX_PER_USER must be an integer >= 1",
      );
    }
  });
});

describe("SESSION_SLIDING_TTL", () => {
  const sliding = { SESSION_SLIDING_TTL: "true", SESSION_IDLE_TIMEOUT_SECONDS: "0" };

  async function expiresAt(token: string, vars: Partial<Env>) {
    const response = await callWith(vars, "GET", "/auth/sessions", bearer(token));
    if (response.status !== 200) return null;
    const body = (await response.json()) as { sessions: { id: string; expires_at: string }[] };
    return body.sessions.find((s) => token.startsWith(`${s.id}.`))?.expires_at;
  }

  it("is off by default: use never moves expires_at", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const session = await issue(newUser(), { ttlSeconds: 3600 });
    vi.setSystemTime(START + 30 * MINUTE);
    expect(await expiresAt(session.token, {})).toBe(new Date(START + 3600_000).toISOString());
  });

  it("renews to now + the session's own TTL with the activity write, in the request's one round trip", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const session = await issue(userId, { ttlSeconds: 3600 });
    vi.setSystemTime(START + 30 * MINUTE);
    const counter = countingShards(databases());
    expect(
      (await callWith({ ...sliding, ...counter.env }, "GET", "/auth/sessions", bearer(session.token))).status,
    ).toBe(200);
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 1 });
    expect(await expiresAt(session.token, sliding)).toBe(new Date(START + 90 * MINUTE).toISOString());
    // Within the activity write interval nothing is written, so nothing moves.
    vi.setSystemTime(START + 33 * MINUTE);
    expect(await expiresAt(session.token, sliding)).toBe(new Date(START + 90 * MINUTE).toISOString());
    // Kept in use, it outlives its first hour; left alone, it ends an hour after its last use.
    vi.setSystemTime(START + 80 * MINUTE);
    expect(await expiresAt(session.token, sliding)).toBe(new Date(START + 140 * MINUTE).toISOString());
    vi.setSystemTime(START + 140 * MINUTE);
    expect(await expiresAt(session.token, sliding)).toBeNull();
  });

  it("never renews past SESSION_MAX_LIFETIME_SECONDS after creation, nor revives an expired session", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const capped = { ...sliding, SESSION_TTL_SECONDS: "86400", SESSION_MAX_LIFETIME_SECONDS: String(2 * 86_400) };
    const session = await issue(newUser(), { ttlSeconds: 86_400 });
    vi.setSystemTime(START + 0.9 * DAY);
    expect(await expiresAt(session.token, capped)).toBe(new Date(START + 1.9 * DAY).toISOString());
    vi.setSystemTime(START + 1.8 * DAY);
    expect(await expiresAt(session.token, capped)).toBe(new Date(START + 2 * DAY).toISOString());
    vi.setSystemTime(START + 2 * DAY);
    expect(await expiresAt(session.token, capped)).toBeNull();
    expect((await callWith(capped, "POST", "/auth/logout", bearer(session.token))).status).toBe(400);
  });

  it("gives the cookie the maximum lifetime, so the browser keeps it while the session can be renewed", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const config = readConfig({
      ...env,
      ...sliding,
      SESSION_TTL_SECONDS: "3600",
      SESSION_MAX_LIFETIME_SECONDS: "604800",
    });
    const created = await issueSession(scopeWith(openShards(env), config), { userId: newUser(), ttlSeconds: 3600 });
    expect(created.cookie).toContain("; Max-Age=604800;");
    expect(created.expiresAt).toBe(new Date(START + 3600_000).toISOString());
  });

  it("refuses a TTL beyond the maximum lifetime, and an inconsistent configuration", async () => {
    const config = readConfig({ ...env, SESSION_TTL_SECONDS: "3600", SESSION_MAX_LIFETIME_SECONDS: "86400" });
    await expect(
      issueSession(scopeWith(openShards(env), config), { userId: newUser(), ttlSeconds: 86_401 }),
    ).rejects.toThrow("ttlSeconds must be an integer from 1 to 86400");
    expect(() => readConfig({ ...env, SESSION_SLIDING_TTL: "yes" })).toThrow(
      'SESSION_SLIDING_TTL must be "true" or "false"',
    );
    expect(() => readConfig({ ...env, SESSION_MAX_LIFETIME_SECONDS: "3600" })).toThrow(
      "SESSION_TTL_SECONDS must be <= SESSION_MAX_LIFETIME_SECONDS",
    );
    expect(() => readConfig({ ...env, SESSION_MAX_LIFETIME_SECONDS: String(400 * 86_400 + 1) })).toThrow(
      "SESSION_MAX_LIFETIME_SECONDS must be <= 34560000",
    );
    expect(() => readConfig({ ...env, SESSION_BOUND_COOKIE_SECONDS: String(400 * 86_400 + 1) })).toThrow(
      "SESSION_BOUND_COOKIE_SECONDS must be <= 34560000",
    );
  });
});

describe("newDevice", () => {
  const CHROME_MAC_NEXT = CHROME_MAC.replace("Chrome/131", "Chrome/132");
  const IPHONE_SAFARI =
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
  const SAFARI_AS_DESKTOP =
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";

  it("is true for a device (browser family and OS, Safari's two faces one) or country the user was not seen with, false otherwise; the created event says the same", async () => {
    const userId = newUser();
    const cases: [Record<string, string>, boolean][] = [
      [{ userAgent: CHROME_MAC, country: "DE" }, true],
      [{ userAgent: CHROME_MAC, country: "DE", ipAddress: "198.51.100.1", city: "Bonn" }, false],
      // A browser update is not a new device.
      [{ userAgent: CHROME_MAC_NEXT, country: "DE" }, false],
      [{ userAgent: CHROME_MAC, country: "FR" }, true],
      [{ userAgent: FIREFOX_LINUX, country: "DE" }, true],
      [{ userAgent: CHROME_MAC }, true],
      // Safari's two faces are one device, as for the context check: an iPhone's, then asking for desktop sites.
      [{ userAgent: IPHONE_SAFARI, country: "DE" }, true],
      [{ userAgent: SAFARI_AS_DESKTOP, country: "DE" }, false],
    ];
    const created: Awaited<ReturnType<typeof exports.SessionService.create>>[] = [];
    for (const [options, expected] of cases) {
      const session = await exports.SessionService.create({ userId, ...options });
      expect({ options, newDevice: session.newDevice }).toEqual({ options, newDevice: expected });
      created.push(session);
    }
    const events = await eventsOf(created[0]!.token);
    for (const [index, [, expected]] of cases.entries()) {
      expect(events.find((e) => e.session_id === created[index]!.id)?.new_device).toBe(expected);
    }
    // Another user's devices do not count.
    expect(
      (await exports.SessionService.create({ userId: newUser(), userAgent: CHROME_MAC, country: "DE" })).newDevice,
    ).toBe(true);
  });

  it("remembers ended sessions within the events retention period, and forgets them after it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const first = await issue(userId, { country: "DE" });
    await call("POST", "/auth/logout", bearer(first.token));
    vi.setSystemTime(START + 90 * DAY - 1);
    expect((await issue(userId, { country: "DE" })).newDevice).toBe(false);

    const forgotten = newUser();
    vi.setSystemTime(START);
    const old = await issue(forgotten, { country: "DE" });
    await call("POST", "/auth/logout", bearer(old.token));
    vi.setSystemTime(START + 90 * DAY + 1);
    expect((await issue(forgotten, { country: "DE" })).newDevice).toBe(true);
  });

  it("remembers a live session used within the retention period, however old its created event", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const old = await issue(userId, { country: "DE", ttlSeconds: 200 * 86_400 });
    vi.setSystemTime(START + 100 * DAY);
    // The created event is past retention and purged; the session itself was used yesterday.
    await callWith({ SESSION_IDLE_TIMEOUT_SECONDS: "0" }, "GET", "/auth/sessions", bearer(old.token));
    await (await d1OfUser(userId)).prepare("DELETE FROM session_events WHERE session_id = ?").bind(old.id).run();
    vi.setSystemTime(START + 101 * DAY);
    expect((await issue(userId, { country: "DE" })).newDevice).toBe(false);
  });
});
