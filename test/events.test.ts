import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventView } from "../src/domain/event-view.ts";
import { purge } from "../src/services/purge.ts";
import { bearer, CHALLENGE, call, expectError, issue, newUser, REJECTED_CHALLENGE, sessionCookie } from "./helpers.ts";
import { deadTokens, tokenExpiringNow } from "./tokens.ts";

afterEach(() => {
  vi.useRealTimers();
});

async function eventsOf(token: string): Promise<EventView[]> {
  const response = await call("GET", "/auth/events", bearer(token));
  expect(response.status).toBe(200);
  expect(response.headers.get("Cache-Control")).toBe("no-store");
  return ((await response.json()) as { events: EventView[] }).events;
}

describe("security log: GET /auth/events", () => {
  it("records each creation and ending with operation, acting session, IP and time, newest first", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const t = (s: number) => new Date(Date.UTC(2026, 10, 22, 9, 0, s)).getTime();
    const user = newUser();
    vi.setSystemTime(t(0));
    const laptop = await issue(user, { ipAddress: "203.0.113.1" });
    vi.setSystemTime(t(1));
    const phone = await issue(user, { ipAddress: "203.0.113.2" });
    const tablet = await issue(user);
    const tv = await issue(user);
    const old = await issue(user);
    vi.setSystemTime(t(2));
    await call("DELETE", `/auth/sessions/${phone.id}`, { ...bearer(laptop.token), "CF-Connecting-IP": "198.51.100.7" });
    vi.setSystemTime(t(3));
    await call("POST", "/auth/logout", { ...sessionCookie(tablet.token), "CF-Connecting-IP": "2001:0db8::0001" });
    vi.setSystemTime(t(4));
    await call("DELETE", "/auth/logout?scope=others", { ...bearer(laptop.token), "CF-Connecting-IP": "198.51.100.7" });
    const events = await eventsOf(laptop.token);
    const at = (s: number) => new Date(t(s)).toISOString();
    // Every session had the same browser, OS and country: only the first was a new device.
    const ending = { reason: null, new_device: null };
    const known = { reason: null, new_device: false };
    expect(events.map(({ id: _id, ...event }) => event)).toEqual([
      {
        type: "logout_others",
        session_id: old.id,
        actor_session_id: laptop.id,
        ip_address: "198.51.100.7",
        created_at: at(4),
        ...ending,
      },
      {
        type: "logout_others",
        session_id: tv.id,
        actor_session_id: laptop.id,
        ip_address: "198.51.100.7",
        created_at: at(4),
        ...ending,
      },
      {
        type: "logout",
        session_id: tablet.id,
        actor_session_id: tablet.id,
        ip_address: "2001:0db8::0001",
        created_at: at(3),
        ...ending,
      },
      {
        type: "deleted",
        session_id: phone.id,
        actor_session_id: laptop.id,
        ip_address: "198.51.100.7",
        created_at: at(2),
        ...ending,
      },
      {
        type: "created",
        session_id: old.id,
        actor_session_id: null,
        ip_address: "203.0.113.7",
        created_at: at(1),
        ...known,
      },
      {
        type: "created",
        session_id: tv.id,
        actor_session_id: null,
        ip_address: "203.0.113.7",
        created_at: at(1),
        ...known,
      },
      {
        type: "created",
        session_id: tablet.id,
        actor_session_id: null,
        ip_address: "203.0.113.7",
        created_at: at(1),
        ...known,
      },
      {
        type: "created",
        session_id: phone.id,
        actor_session_id: null,
        ip_address: "203.0.113.2",
        created_at: at(1),
        ...known,
      },
      {
        type: "created",
        session_id: laptop.id,
        actor_session_id: null,
        ip_address: "203.0.113.1",
        created_at: at(0),
        reason: null,
        new_device: true,
      },
    ]);
    const ids = events.map((event) => event.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
  });

  it("records one logout_all per ended session, and only the user's own log is listed", async () => {
    const user = newUser();
    const a = await issue(user);
    const b = await issue(user);
    const someoneElse = await issue(newUser());
    await call("DELETE", "/auth/logout", bearer(a.token));
    const fresh = await issue(user);
    const events = await eventsOf(fresh.token);
    expect(
      events
        .filter((e) => e.type === "logout_all")
        .map((e) => e.session_id)
        .sort(),
    ).toEqual([a.id, b.id].sort());
    expect(events.every((e) => e.session_id !== someoneElse.id)).toBe(true);
  });

  it("logs nothing when nothing ended", async () => {
    const user = newUser();
    const a = await issue(user);
    const before = await eventsOf(a.token);
    await call("DELETE", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA", bearer(a.token));
    await call("POST", "/auth/logout", bearer(`${a.id}.${"x".repeat(43)}`));
    await call("DELETE", "/auth/logout?scope=others", bearer(a.token));
    expect(await eventsOf(a.token)).toEqual(before);
  });

  it("is bounded to the newest 100", async () => {
    const user = newUser();
    const sessions = [];
    for (let i = 0; i < 60; i++) sessions.push(await issue(user));
    // 60 created, 10 evicted (the cap is 50), 50 logout_all, 1 created: 121 events.
    await call("DELETE", "/auth/logout", bearer(sessions.at(-1)!.token));
    const fresh = await issue(user);
    const events = await eventsOf(fresh.token);
    expect(events).toHaveLength(100);
    expect(events[0]).toMatchObject({ type: "created", session_id: fresh.id });
  });

  it("takes Bearer or the session cookie, with the list's error rules", async () => {
    const session = await issue(newUser());
    const byCookie = await call("GET", "/auth/events", {
      ...sessionCookie(session.token),
      "Sec-Fetch-Site": "same-origin",
    });
    expect(byCookie.status).toBe(200);
    expect(((await byCookie.json()) as { events: EventView[] }).events).toEqual(await eventsOf(session.token));
    await expectError(await call("GET", "/auth/events"), 401, "invalid_token", { wwwAuthenticate: CHALLENGE });
    await expectError(await call("GET", "/auth/events", sessionCookie("x")), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    await expectError(
      await call("GET", "/auth/events", { ...sessionCookie(session.token), "Sec-Fetch-Site": "cross-site" }),
      403,
      "cross_site_request",
    );
    await expectError(await call("GET", "/auth/events", { Authorization: "Basic x" }), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
    await expectError(await call("GET", "/auth/events", { Authorization: "Bearer x" }), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    for (const token of [...Object.values(await deadTokens()), await tokenExpiringNow()]) {
      await expectError(await call("GET", "/auth/events", bearer(token)), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
    }
    vi.useRealTimers();
    for (const method of ["POST", "DELETE", "PUT"]) {
      await expectError(await call(method, "/auth/events", bearer(session.token)), 405, "method_not_allowed", {
        allow: "GET, HEAD",
      });
    }
  });

  it("is pruned by the scheduled job after the retention period (90 days)", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    // After every event the file logged before (the table is in time order: src/db/schema.ts).
    const start = Date.UTC(2036, 0, 1);
    vi.setSystemTime(start);
    const user = newUser();
    const early = await issue(user, { ttlSeconds: 400 * 86_400 });
    vi.setSystemTime(start + 89 * 86_400_000);
    const later = await issue(user, { ttlSeconds: 400 * 86_400 });
    vi.setSystemTime(start + 90 * 86_400_000);
    await purge({ ...env, SESSION_IDLE_TIMEOUT_SECONDS: "0" });
    const events = await eventsOf(later.token);
    expect(events.map((e) => e.session_id)).toEqual([later.id]);
    expect(early.id).not.toBe(later.id);
  });
});
