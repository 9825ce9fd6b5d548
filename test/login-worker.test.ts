import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { bearer, CHROME_MAC, call, FIREFOX_LINUX, tableSnapshot } from "./helpers.ts";

// examples/login-worker runs as an auxiliary worker whose SESSIONS binding is a real service
// binding to this worker's SessionService entrypoint: every call below crosses Workers RPC.

async function login(userAgent: string, password = "wonderland") {
  const response = await env.LOGIN_WORKER.fetch("https://login.example/login", {
    method: "POST",
    headers: { "Content-Type": "application/json", "User-Agent": userAgent, "CF-Connecting-IP": "203.0.113.50" },
    body: JSON.stringify({ user: "alice", password }),
  });
  const cookie = response.headers.get("Set-Cookie");
  return {
    status: response.status,
    body: await response.json(),
    cookie,
    token: cookie?.match(/^__Host-session=([^;]+)/)?.[1],
  };
}

// From the browser that signed in: the example passes the request's context on to authenticate.
const me = (token: string | undefined, userAgent = CHROME_MAC) =>
  env.LOGIN_WORKER.fetch("https://login.example/me", {
    headers: { Cookie: `__Host-session=${token}`, "User-Agent": userAgent },
  });

describe("example login worker over a real service binding", () => {
  it("signs in with the ready cookie, protects a route, and a password change ends the other sessions", async () => {
    const laptop = await login(CHROME_MAC);
    expect(laptop.status).toBe(200);
    expect(laptop.body).toEqual({ signedIn: "alice", newDevice: true });
    expect(laptop.cookie).toMatch(
      /^__Host-session=[\w-]{24}\.[\w-]{43}; Max-Age=2592000; Path=\/; HttpOnly; Secure; SameSite=Lax$/,
    );
    const phone = await login(FIREFOX_LINUX);
    expect(phone.body).toEqual({ signedIn: "alice", newDevice: true });
    expect((await login(CHROME_MAC)).body).toEqual({ signedIn: "alice", newDevice: false });

    const whoAmI = await me(laptop.token);
    expect(whoAmI.status).toBe(200);
    expect(await whoAmI.json()).toEqual({ userId: "alice", sessionId: laptop.token!.split(".")[0] });
    expect((await me(undefined)).status).toBe(401);

    const changed = await env.LOGIN_WORKER.fetch("https://login.example/password", {
      method: "POST",
      headers: {
        Cookie: `__Host-session=${laptop.token}`,
        "Content-Type": "application/json",
        "User-Agent": CHROME_MAC,
      },
      body: JSON.stringify({ newPassword: "looking-glass" }),
    });
    expect(await changed.json()).toEqual({ passwordChanged: true, otherSessionsEnded: 2 });
    expect((await me(phone.token, FIREFOX_LINUX)).status).toBe(401);
    expect((await me(laptop.token)).status).toBe(200);
    expect((await login(CHROME_MAC)).status).toBe(401);

    // The service's own log says why the phone's session ended.
    const events = (await (await call("GET", "/auth/events", bearer(laptop.token!))).json()) as {
      events: { type: string; session_id: string; reason: string | null }[];
    };
    expect(
      events.events.find((e) => e.session_id === phone.token!.split(".")[0] && e.type !== "created"),
    ).toMatchObject({
      type: "ended",
      reason: "password_changed",
    });

    // The laptop's cookie replayed from another browser fails on the login worker's routes too,
    // and from then on on the laptop itself, until the user signs in again.
    expect((await me(laptop.token, FIREFOX_LINUX)).status).toBe(401);
    expect((await me(laptop.token)).status).toBe(401);
  });

  it("answers 400 to a sign-in that is not JSON with a user and a password, and signs no one in", async () => {
    const bodies: [string, string][] = [
      ["application/x-www-form-urlencoded", "user=alice&password=wonderland"],
      ["application/json", "{not json"],
      ["application/json", JSON.stringify({ user: "alice" })],
      ["application/json", JSON.stringify({ user: "alice", password: 1 })],
    ];
    const before = await tableSnapshot();
    for (const [type, body] of bodies) {
      const response = await env.LOGIN_WORKER.fetch("https://login.example/login", {
        method: "POST",
        headers: { "Content-Type": type, "User-Agent": CHROME_MAC },
        body,
      });
      expect(response.status, body).toBe(400);
      expect(response.headers.get("Set-Cookie"), body).toBeNull();
    }
    expect(await tableSnapshot()).toEqual(before);
  });
});
