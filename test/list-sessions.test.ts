import { afterEach, describe, expect, it, vi } from "vitest";
import {
  bearer,
  CHALLENGE,
  CHROME_MAC,
  COOKIE_NAME,
  call,
  d1OfUser,
  expectError,
  issue,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
} from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("GET /auth/sessions", () => {
  it("lists exactly the caller's live sessions, newest first, with the contract's fields", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const alice = newUser();
    vi.setSystemTime(new Date("2026-11-22T01:00:00.000Z"));
    const oldest = await issue(alice, { ipAddress: "198.51.100.23", userAgent: "", country: "DE" });
    vi.setSystemTime(new Date("2026-11-22T01:00:01.250Z"));
    const middle = await issue(alice, {
      ipAddress: "2001:0db8:0000:0000:0000:0000:0000:0001",
      userAgent:
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    });
    vi.setSystemTime(new Date("2026-11-22T01:00:02.500Z"));
    const current = await issue(alice, { ttlSeconds: 3600, country: "DE", city: "Berlin" });
    await issue(newUser()); // someone else's session is never listed
    const expired = await issue(alice, { ttlSeconds: 1 });
    vi.setSystemTime(new Date("2026-11-22T01:00:03.500Z"));
    expect(expired.expiresAt).toBe("2026-11-22T01:00:03.500Z");

    const response = await call("GET", "/auth/sessions", bearer(current.token));

    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("application/json");
    expect(response.headers.get("Cache-Control")).toBe("no-store");
    expect(response.headers.get("Set-Cookie")).toBeNull();
    expect(await response.json()).toEqual({
      sessions: [
        {
          id: current.id,
          name: "Chrome 131 on macOS · 203.0.113.7",
          ip_address: "203.0.113.7",
          user_agent: CHROME_MAC,
          created_at: "2026-11-22T01:00:02.500Z",
          expires_at: "2026-11-22T02:00:02.500Z",
          last_active_at: "2026-11-22T01:00:02.500Z",
          location: "Berlin, DE",
          device: { browser: "Chrome 131", os: "macOS", type: "desktop" },
          last_seen: { browser: "Chrome", os: "macOS", country: "DE", asn: null },
        },
        {
          id: middle.id,
          name: "Mobile Safari 17 on iOS · 2001:0db8:0000:0000:0000:0000:0000:0001",
          ip_address: "2001:0db8:0000:0000:0000:0000:0000:0001",
          user_agent:
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
          created_at: "2026-11-22T01:00:01.250Z",
          expires_at: "2026-12-22T01:00:01.250Z",
          last_active_at: "2026-11-22T01:00:01.250Z",
          location: null,
          device: { browser: "Mobile Safari 17", os: "iOS", type: "mobile" },
          last_seen: { browser: "Mobile Safari", os: "iOS", country: null, asn: null },
        },
        {
          id: oldest.id,
          name: "Unknown browser · 198.51.100.23",
          ip_address: "198.51.100.23",
          user_agent: "",
          created_at: "2026-11-22T01:00:00.000Z",
          expires_at: "2026-12-22T01:00:00.000Z",
          last_active_at: "2026-11-22T01:00:00.000Z",
          location: "DE",
          device: { browser: null, os: null, type: "unknown" },
          last_seen: { browser: null, os: null, country: "DE", asn: null },
        },
      ],
      currentSessionId: current.id,
    });
  });

  it("breaks created_at ties by id, descending", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-22T05:00:00.000Z"));
    const user = newUser();
    const issued = await Promise.all([issue(user), issue(user), issue(user), issue(user)]);
    const response = await call("GET", "/auth/sessions", bearer(issued[0]!.token));
    const body = (await response.json()) as { sessions: { id: string }[] };
    const expected = issued.map((s) => s.id).sort((a, b) => (a < b ? 1 : -1));
    expect(body.sessions.map((s) => s.id)).toEqual(expected);
  });

  it("never puts a token or its hash in the body", async () => {
    const user = newUser();
    const a = await issue(user);
    const b = await issue(user);
    const text = await (await call("GET", "/auth/sessions", bearer(a.token))).text();
    const { results } = await (await d1OfUser(user))
      .prepare("SELECT secret_hash FROM sessions WHERE user_id = ?")
      .bind(user)
      .all<{ secret_hash: string }>();
    expect(results).toHaveLength(2);
    for (const secret of [a.token, b.token, ...a.token.split("."), b.token.split(".")[1]!]) {
      if (secret !== a.id) expect(text).not.toContain(secret);
    }
    for (const { secret_hash } of results) expect(text).not.toContain(secret_hash);
  });

  it("shows a session's IP as blank when none was known, and truncates the user agent to 512", async () => {
    const user = newUser();
    const long = `Mozilla/5.0 ${"x".repeat(600)}`;
    const session = await issue(user, { ipAddress: "not an ip", userAgent: long });
    const headers = { ...bearer(session.token), "User-Agent": long };
    const body = (await (await call("GET", "/auth/sessions", headers)).json()) as {
      sessions: { ip_address: string; user_agent: string; name: string }[];
    };
    expect(body.sessions[0]).toMatchObject({ ip_address: "", user_agent: long.slice(0, 512), name: "Unknown browser" });
  });

  it("never cuts a character in two when truncating the user agent", async () => {
    const userAgent = `${"a".repeat(511)}😀tail`;
    const session = await issue(newUser(), { userAgent });
    const headers = { ...bearer(session.token), "User-Agent": userAgent };
    const body = (await (await call("GET", "/auth/sessions", headers)).json()) as {
      sessions: { user_agent: string }[];
    };
    expect(body.sessions[0]?.user_agent).toBe("a".repeat(511));
  });

  it("answers HEAD like GET, without a body", async () => {
    const session = await issue(newUser());
    const response = await call("HEAD", "/auth/sessions", bearer(session.token));
    expect(response.status).toBe(200);
    expect(response.headers.get("Cache-Control")).toBe("no-store");
    expect(await response.text()).toBe("");
  });

  it("accepts the session cookie from the same site: the same answer as by Bearer", async () => {
    const user = newUser();
    const session = await issue(user);
    await issue(user);
    const byBearer = await (await call("GET", "/auth/sessions", bearer(session.token))).json();
    const response = await call("GET", "/auth/sessions", {
      ...sessionCookie(session.token),
      "Sec-Fetch-Site": "same-origin",
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("Set-Cookie")).toBeNull();
    expect(await response.json()).toEqual(byBearer);
  });

  it("refuses a cookie it cannot prove with 401 invalid_token and the error, and keeps the cookie", async () => {
    const session = await issue(newUser());
    for (const value of ["", "garbage", `${session.id}.${"x".repeat(43)}`]) {
      await expectError(
        await call("GET", "/auth/sessions", { Cookie: `${COOKIE_NAME}=${value}` }),
        401,
        "invalid_token",
        {
          wwwAuthenticate: REJECTED_CHALLENGE,
        },
      );
    }
    // Other cookies are no credential: the answer to a request without one.
    await expectError(await call("GET", "/auth/sessions", { Cookie: "theme=dark" }), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
  });

  it("lets an Authorization header decide alone: a refused Bearer token never falls back to the cookie", async () => {
    const session = await issue(newUser());
    for (const [authorization, wwwAuthenticate] of [
      ["Basic x", CHALLENGE],
      [`Bearer ${session.id}.${"x".repeat(43)}`, REJECTED_CHALLENGE],
    ] as const) {
      const headers = { ...sessionCookie(session.token), Authorization: authorization };
      await expectError(await call("GET", "/auth/sessions", headers), 401, "invalid_token", { wwwAuthenticate });
    }
  });

  it("rejects a token that was logged out", async () => {
    const session = await issue(newUser());
    expect((await call("POST", "/auth/logout", bearer(session.token))).status).toBe(200);
    await expectError(await call("GET", "/auth/sessions", bearer(session.token)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
  });

  it("ignores a token in the query string", async () => {
    const session = await issue(newUser());
    await expectError(await call("GET", `/auth/sessions?access_token=${session.token}`), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
  });
});
