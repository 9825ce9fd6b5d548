import { exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearer, call, callWith, issue, newUser } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
});

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const START = new Date("2026-11-01T00:00:00.000Z").getTime();

async function lastActive(token: string, id: string): Promise<string | undefined> {
  const body = (await (await call("GET", "/auth/sessions", bearer(token))).json()) as {
    sessions: { id: string; last_active_at: string }[];
  };
  return body.sessions.find((session) => session.id === id)?.last_active_at;
}

describe("last activity", () => {
  it("is written at most once per five minutes, by the request's own round trip", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const session = await issue(newUser());
    vi.setSystemTime(START + 4 * MINUTE);
    expect(await lastActive(session.token, session.id)).toBe(new Date(START).toISOString());
    vi.setSystemTime(START + 5 * MINUTE);
    expect(await lastActive(session.token, session.id)).toBe(new Date(START + 5 * MINUTE).toISOString());
    vi.setSystemTime(START + 9 * MINUTE);
    expect(await lastActive(session.token, session.id)).toBe(new Date(START + 5 * MINUTE).toISOString());
  });

  it("is shown for every session, each with its own", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const user = newUser();
    const idle = await issue(user);
    const busy = await issue(user);
    vi.setSystemTime(START + 10 * MINUTE);
    expect(await lastActive(busy.token, idle.id)).toBe(new Date(START).toISOString());
    expect(await lastActive(busy.token, busy.id)).toBe(new Date(START + 10 * MINUTE).toISOString());
  });

  it("is recorded by SessionService.authenticate too", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const user = newUser();
    const viaRpc = await issue(user);
    const viewer = await issue(user);
    vi.setSystemTime(START + 30 * MINUTE);
    expect(await exports.SessionService.authenticate(viaRpc.token)).not.toBeNull();
    vi.setSystemTime(START + 31 * MINUTE);
    expect(await lastActive(viewer.token, viaRpc.id)).toBe(new Date(START + 30 * MINUTE).toISOString());
  });
});

describe("idle timeout (SESSION_IDLE_TIMEOUT_SECONDS, default 14 days)", () => {
  it("a session idle for 14 days stops authenticating, exactly like an expired one", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const user = newUser();
    const idle = await issue(user);
    const used = await issue(user);
    vi.setSystemTime(START + 14 * DAY - 1);
    expect(await exports.SessionService.authenticate(used.token)).not.toBeNull();
    vi.setSystemTime(START + 14 * DAY);
    expect((await call("POST", "/auth/logout", bearer(idle.token))).status).toBe(400);
    expect(await exports.SessionService.authenticate(idle.token)).toBeNull();
    expect((await call("GET", "/auth/sessions", bearer(used.token))).status).toBe(200);
  });

  it("is never revived by a late request, and is not listed", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const user = newUser();
    const idle = await issue(user, { ttlSeconds: 60 * 86_400 });
    vi.setSystemTime(START + 14 * DAY);
    const other = await issue(user);
    expect((await call("GET", "/auth/sessions", bearer(idle.token))).status).toBe(401);
    expect(await exports.SessionService.authenticate(idle.token)).toBeNull();
    expect((await call("DELETE", "/auth/logout", bearer(idle.token))).status).toBe(401);
    const body = (await (await call("GET", "/auth/sessions", bearer(other.token))).json()) as {
      sessions: { id: string }[];
    };
    expect(body.sessions.map((s) => s.id)).toEqual([other.id]);
  });

  it("0 disables it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const session = await issue(newUser(), { ttlSeconds: 90 * 86_400 });
    vi.setSystemTime(START + 60 * DAY);
    expect((await call("GET", "/auth/sessions", bearer(session.token))).status).toBe(401);
    expect(
      (await callWith({ SESSION_IDLE_TIMEOUT_SECONDS: "0" }, "GET", "/auth/sessions", bearer(session.token))).status,
    ).toBe(200);
  });
});
