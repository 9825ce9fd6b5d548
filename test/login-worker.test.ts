import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { WORDS } from "../examples/login-worker/src/security-log.ts";
import {
  bearer,
  CHROME_MAC,
  call,
  expectError,
  FIREFOX_LINUX,
  REJECTED_CHALLENGE,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";
import { admin, adminKeyVars } from "./organization-fixtures.ts";

// examples/login-worker runs as an auxiliary worker whose SESSIONS binding is a real service
// binding to this worker's SessionService entrypoint: every call below crosses Workers RPC.

async function login(userAgent: string, password = "wonderland", user = "alice") {
  const response = await env.LOGIN_WORKER.fetch("https://login.example/login", {
    method: "POST",
    headers: { "Content-Type": "application/json", "User-Agent": userAgent, "CF-Connecting-IP": "203.0.113.50" },
    body: JSON.stringify({ user, password }),
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
    const events = (await (await call("GET", "/auth/events", sessionCookie(laptop.token!))).json()) as {
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

  it("a browser's sign-in is cookie-only: its cookie's value sent as Bearer from a script proves nothing", async () => {
    const laptop = await login(CHROME_MAC, "wonderland", "bob");
    const script = { ...bearer(laptop.token!), "User-Agent": CHROME_MAC };
    await expectError(await call("GET", "/auth/sessions", script), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    expect((await me(laptop.token)).status).toBe(200);
  });

  it("an API client's sign-in answers a token that works as Bearer from the client's own User-Agent, and sets no cookie", async () => {
    const response = await env.LOGIN_WORKER.fetch("https://login.example/api/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", "User-Agent": "okhttp/4.12.0" },
      body: JSON.stringify({ user: "bob", password: "wonderland" }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("Set-Cookie")).toBeNull();
    const body = (await response.json()) as { signedIn: string; token: string; expiresAt: string; newDevice: boolean };
    expect(body).toEqual({
      signedIn: "bob",
      token: expect.stringMatching(/^[\w-]{24}\.[\w-]{43}$/),
      expiresAt: expect.any(String),
      newDevice: true,
    });
    // Through the login worker's /auth/* (the service's own routes on this origin), from any client.
    for (const userAgent of ["okhttp/4.12.0", "MyApp/3 CFNetwork/1490 Darwin/23.0.0", FIREFOX_LINUX]) {
      const listed = await env.LOGIN_WORKER.fetch("https://login.example/auth/sessions", {
        headers: { ...bearer(body.token), "User-Agent": userAgent },
      });
      expect(listed.status).toBe(200);
    }
    // Not a browser's: the login worker's cookie routes do not take it.
    expect((await me(body.token)).status).toBe(401);
    const ended = await env.LOGIN_WORKER.fetch("https://login.example/auth/logout", {
      method: "POST",
      headers: { ...bearer(body.token), "User-Agent": "curl/8.5.0" },
    });
    expect(ended.status).toBe(200);
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

describe("example login worker: the support desk", () => {
  const support = (token: string | undefined, body: unknown) =>
    env.LOGIN_WORKER.fetch("https://login.example/support", {
      method: "POST",
      headers: { Cookie: `__Host-session=${token}`, "Content-Type": "application/json", "User-Agent": CHROME_MAC },
      body: JSON.stringify(body),
    });

  it("an agent opens support access over RPC; the customer's session list shows it; it opens no other", async () => {
    const customer = await login(CHROME_MAC, "wonderland", "bob");
    const agent = await login(CHROME_MAC, "wonderland", "carol");
    const opened = await support(agent.token, { user: "bob", reason: "Ticket 4711" });
    expect(opened.status).toBe(200);
    const { token } = (await opened.json()) as { token: string };
    const whoAmI = await me(token);
    expect(await whoAmI.json()).toEqual({
      userId: "bob",
      sessionId: token.split(".")[0],
      actor: { sub: "carol", reason: "Ticket 4711" },
    });
    const listed = await call("GET", "/auth/sessions", sessionCookie(customer.token as string));
    const { sessions } = (await listed.json()) as { sessions: { id: string; name: string; actor?: unknown }[] };
    expect(sessions.find((session) => session.id === token.split(".")[0])).toMatchObject({
      name: "Support access by carol",
      actor: { sub: "carol", reason: "Ticket 4711" },
    });
    // Support access changes no password (which would end every session of bob's but its own).
    const password = await env.LOGIN_WORKER.fetch("https://login.example/password", {
      method: "POST",
      headers: { Cookie: `__Host-session=${token}`, "Content-Type": "application/json", "User-Agent": CHROME_MAC },
      body: JSON.stringify({ newPassword: "taken" }),
    });
    expect({ status: password.status, body: await password.json() }).toEqual({
      status: 403,
      body: { error: "only the user can change the password" },
    });
    expect((await login(CHROME_MAC, "wonderland", "bob")).status).toBe(200);
    // Support access opens none, and only agents open any.
    expect((await support(token, { user: "alice", reason: "chained" })).status).toBe(403);
    expect((await support(customer.token, { user: "alice", reason: "not an agent" })).status).toBe(403);
    // The service's refusal reaches the agent as a 400 saying what to fix.
    const refused = await support(agent.token, { user: "carol", reason: "myself" });
    expect({ status: refused.status, body: await refused.json() }).toEqual({
      status: 400,
      body: { error: "agentId must not be the user: support access is by someone else" },
    });
  });
});

describe("example login worker: the devices page", () => {
  it("carries the security log's words and leaves every time to the browser", async () => {
    const { token } = await login(CHROME_MAC, "wonderland", "carol");
    const page = await env.LOGIN_WORKER.fetch("https://login.example/", {
      headers: { Cookie: `__Host-session=${token}`, "User-Agent": CHROME_MAC },
    });
    expect(page.status).toBe(200);
    expect(page.headers.get("Content-Type")).toBe("text/html; charset=UTF-8");
    const html = await page.text();
    const words = /<script type="application\/json" id="words">(.*?)<\/script>/.exec(html)?.[1];
    expect(words).toBe(JSON.stringify(WORDS));
    expect(JSON.parse(words as string).reasons.ended.password_changed).toBe("the password was changed");
    expect(html).toContain('<h2>Security log</h2>\n  <ol id="security-log"></ol>');
    // No time is written on the server: the browser says each in words, and in its own zone on hover.
    expect(html).not.toContain("UTC");
  });
});

describe("example login worker: a business customer's employee", () => {
  /** Globex onboarded as dev/demo.ts does at start: its organization, then its policy. */
  async function onboardGlobex() {
    const { key, ADMIN_KEYS } = await adminKeyVars(["organizations"]);
    const vars = { ADMIN_KEYS } as Partial<Env>;
    const id = "org_demoGlobexDemoGlobex00";
    expect((await admin(vars, key, "POST", "/admin/organizations", { id, name: "Globex" })).status).toBe(201);
    const policy = { ttlSeconds: 28_800, maxLifetimeSeconds: 28_800, idleTimeoutSeconds: 900, maxPerUser: 3 };
    expect((await admin(vars, key, "PUT", `/admin/organizations/${id}/policy`, policy)).status).toBe(200);
  }

  const devicesPage = async (token: string | undefined) =>
    (
      await env.LOGIN_WORKER.fetch("https://login.example/", {
        headers: { Cookie: `__Host-session=${token}`, "User-Agent": CHROME_MAC },
      })
    ).text();

  it("signs dana in to Globex's organization, under its 8-hour policy, and her devices page states its rules", async () => {
    await onboardGlobex();
    const dana = await login(CHROME_MAC, "wonderland", "dana");
    expect(dana.body).toEqual({ signedIn: "dana", newDevice: true });
    // Issued for Globex's 8 hours, not the deployment's 30 days.
    expect(dana.cookie).toMatch(
      /^__Host-session=[\w-]{24}\.[\w-]{44}; Max-Age=28800; Path=\/; HttpOnly; Secure; SameSite=Lax$/,
    );
    const whoami = await call("GET", "/auth/whoami", { ...sessionCookie(dana.token!), "User-Agent": CHROME_MAC });
    expect(await whoami.json()).toMatchObject({ user_id: "dana", organization: "org_demoGlobexDemoGlobex00" });
    expect(await devicesPage(dana.token)).toContain(
      '<p id="organization">Globex · sessions end after 8 hours, or 15 minutes idle · at most 3 devices</p>',
    );

    // The product's own users sign in to no organization, and their page has no such line.
    const bob = await login(CHROME_MAC, "wonderland", "bob");
    const bobWhoami = await call("GET", "/auth/whoami", { ...sessionCookie(bob.token!), "User-Agent": CHROME_MAC });
    expect(await bobWhoami.json()).toMatchObject({ user_id: "bob", organization: null });
    expect(await devicesPage(bob.token)).not.toContain('id="organization"');
  });
});
