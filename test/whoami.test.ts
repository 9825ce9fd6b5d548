import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type AuthenticatedSession, SessionService } from "../src/rpc/session-service.ts";
import {
  bearer,
  CHALLENGE,
  CHROME_MAC,
  call,
  callWith,
  expectError,
  expectSecurityHeaders,
  FIREFOX_WINDOWS,
  issue,
  newUser,
  ORIGIN,
  REJECTED_CHALLENGE,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";
import { deadTokens, MALFORMED_AUTHORIZATION, NOT_BEARER, tokenExpiringNow } from "./tokens.ts";

// GET /auth/whoami: who a session token belongs to, for a backend on any stack, by the same
// credentials and rules as the four operations.

afterEach(() => {
  vi.useRealTimers();
});

const HOME = { country: "DE", asn: 3320 };
const STEP_UP =
  'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';

async function whoami(headers: Record<string, string>, query = "") {
  const response = await call("GET", `/auth/whoami${query}`, headers);
  return { status: response.status, body: await response.json(), response };
}

describe("GET /auth/whoami", () => {
  it("answers the live session's user, by Bearer or by the session cookie, never cached", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.UTC(2026, 10, 27, 9, 0, 0));
    const userId = newUser();
    const session = await exports.SessionService.create({
      userId,
      userAgent: CHROME_MAC,
      factors: [{ factor: "pwd", completedAt: "2026-11-27T08:59:00.000Z" }, "otp"],
      assuranceLevel: 2,
    });
    const expected = {
      session_id: session.id,
      user_id: userId,
      expires_at: session.expiresAt,
      authenticated_at: "2026-11-27T09:00:00.000Z",
      amr: ["pwd", "otp"],
      assurance_level: 2,
      organization: null,
      device_bound: false,
    };
    for (const credential of [bearer(session.token), sessionCookie(session.token)]) {
      const { status, body, response } = await whoami(credential);
      expect({ status, body }).toEqual({ status: 200, body: expected });
      expect(response.headers.get("Cache-Control")).toBe("no-store");
      expect(response.headers.get("Content-Type")).toBe("application/json");
      expect(response.headers.get("Set-Cookie")).toBeNull();
      expectSecurityHeaders(response);
    }
  });

  it("a session issued without factors: authenticated at its sign-in, no amr, no level", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const { body } = await whoami(bearer(session.token));
    expect(body).toMatchObject({ user_id: userId, amr: [], assurance_level: null, device_bound: false });
    expect(Object.keys(body as object)).not.toContain("fresh");
  });

  it("max_age adds fresh: whether the last proof is at most that many seconds old", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.UTC(2026, 10, 27, 9, 0, 0);
    vi.setSystemTime(start);
    const session = await issue(newUser());
    vi.setSystemTime(start + 300_000);
    expect((await whoami(bearer(session.token), "?max_age=300")).body).toMatchObject({ fresh: true });
    expect((await whoami(bearer(session.token), "?max_age=299")).body).toMatchObject({ fresh: false });
    expect((await whoami(bearer(session.token), "?max_age=0")).body).toMatchObject({ fresh: false });
  });

  it("support access: the actor, and never fresh", async () => {
    const userId = newUser();
    await issue(userId);
    const support = await exports.SessionService.openSupportSession({
      userId,
      agentId: "agent-ada",
      reason: "Ticket 42",
    });
    const { status, body } = await whoami(bearer(support.token), "?max_age=3600");
    expect(status).toBe(200);
    expect(body).toMatchObject({
      session_id: support.id,
      user_id: userId,
      fresh: false,
      actor: { sub: "agent-ada", reason: "Ticket 42" },
    });
  });

  it("says what SessionService.authenticate says, member for member, in the contract's names: one view of the caller", async () => {
    const upstreams: Partial<Env> = {
      SSF_UPSTREAMS: JSON.stringify([
        { issuer: "https://corp.example", name: "corp", client_id: "app", jwks_uri: "https://corp.example/jwks" },
      ]),
    };
    const service = new SessionService(createExecutionContext(), { ...env, ...upstreams });
    const userId = newUser();
    const own = await service.create({
      userId,
      factors: ["pwd", "otp"],
      assuranceLevel: 2,
      data: { tenant: "acme" },
      upstream: { provider: "corp", subject: "corp-1", sid: "sid-1" },
    });
    const support = await service.openSupportSession({ userId, agentId: "agent-ada", reason: "Ticket 42" });
    for (const token of [own.token, support.token]) {
      const view = (await service.authenticate(token, { maxAge: 3600 })) as AuthenticatedSession;
      const response = await callWith(upstreams, "GET", "/auth/whoami?max_age=3600", bearer(token));
      expect(await response.json()).toEqual({
        session_id: view.sessionId,
        user_id: view.userId,
        expires_at: view.expiresAt,
        authenticated_at: view.authenticatedAt,
        amr: view.factors.map((proof) => proof.factor),
        assurance_level: view.assuranceLevel,
        organization: view.organization,
        device_bound: view.deviceBound ?? false,
        fresh: view.fresh,
        ...(view.actor ? { actor: view.actor } : {}),
        ...(view.data ? { data: view.data } : {}),
        ...(view.upstream ? { upstream: view.upstream } : {}),
      });
    }
    expect(Object.keys((await service.authenticate(own.token, { maxAge: 60 })) ?? {})).toEqual([
      "sessionId",
      "userId",
      "expiresAt",
      "authenticatedAt",
      "factors",
      "assuranceLevel",
      "organization",
      "fresh",
      "data",
      "upstream",
    ]);
  });

  it("a revocation is seen by the very next call", async () => {
    const session = await issue(newUser());
    expect((await whoami(bearer(session.token))).status).toBe(200);
    expect((await call("POST", "/auth/logout", bearer(session.token))).status).toBe(200);
    await expectError(await call("GET", "/auth/whoami", bearer(session.token)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
  });

  it("writes nothing when no activity is due", async () => {
    const session = await issue(newUser());
    expect((await whoami(bearer(session.token))).status).toBe(200);
    const before = await tableSnapshot();
    const events = await tableSnapshot("session_events");
    expect((await whoami(sessionCookie(session.token))).status).toBe(200);
    expect(await tableSnapshot()).toEqual(before);
    expect(await tableSnapshot("session_events")).toEqual(events);
  });

  it("a session held by a context change: the RFC 9470 challenge", async () => {
    const session = await issue(newUser(), { ...HOME, carrier: "cookie" });
    const from = (userAgent: string) =>
      callWith(
        {},
        "GET",
        "/auth/whoami",
        { ...sessionCookie(session.token), "User-Agent": userAgent },
        undefined,
        HOME,
      );
    await expectError(await from(FIREFOX_WINDOWS), 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    // Held for its own browser too, until reauthenticate.
    await expectError(await from(CHROME_MAC), 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
  });

  it("carriers: a browser's cookie-only token is refused as Bearer, an app's Bearer-only token as a cookie", async () => {
    const browser = await issue(newUser(), { carrier: "cookie" });
    const app = await issue(newUser(), { carrier: "bearer" });
    expect((await whoami(sessionCookie(browser.token))).status).toBe(200);
    expect((await whoami(bearer(app.token))).status).toBe(200);
    for (const refused of [bearer(browser.token), sessionCookie(app.token)])
      await expectError(await call("GET", "/auth/whoami", refused), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
  });

  it("a cookie from another site is refused before anything else; a Bearer call from anywhere is not", async () => {
    const session = await issue(newUser());
    const crossSite = { "Sec-Fetch-Site": "cross-site", Origin: "https://evil.example" };
    await expectError(
      await call("GET", "/auth/whoami", { ...sessionCookie(session.token), ...crossSite }),
      403,
      "cross_site_request",
    );
    expect((await whoami({ ...bearer(session.token), ...crossSite })).status).toBe(200);
    expect((await whoami({ ...sessionCookie(session.token), Origin: ORIGIN })).status).toBe(200);
  });
});

describe("GET /auth/whoami: refused credentials and bad input, nothing written", () => {
  it("no token: 401 without an error code; another scheme counts as none", async () => {
    await expectError(await call("GET", "/auth/whoami"), 401, "invalid_token", { wwwAuthenticate: CHALLENGE });
    for (const authorization of Object.values(NOT_BEARER))
      await expectError(await call("GET", "/auth/whoami", { Authorization: authorization }), 401, "invalid_token", {
        wwwAuthenticate: CHALLENGE,
      });
  });

  it("malformed, unknown, revoked and expired tokens: 401 invalid_token", async () => {
    for (const authorization of Object.values(MALFORMED_AUTHORIZATION))
      await expectError(await call("GET", "/auth/whoami", { Authorization: authorization }), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
    for (const token of Object.values(await deadTokens()))
      await expectError(await call("GET", "/auth/whoami", bearer(token)), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
    await expectError(await call("GET", "/auth/whoami", bearer(await tokenExpiringNow())), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
  });

  it("max_age that is not one whole number of seconds, 0 or more: 400 invalid_max_age, before any database call", async () => {
    const session = await issue(newUser());
    const before = await tableSnapshot();
    for (const query of ["-1", "1.5", "1e3", "abc", "", "%200", "12345678901", "60&max_age=60"]) {
      await expectError(
        await call("GET", `/auth/whoami?max_age=${query}`, bearer(session.token)),
        400,
        "invalid_max_age",
      );
    }
    expect(await tableSnapshot()).toEqual(before);
  });

  it("other methods: 405 with Allow", async () => {
    const session = await issue(newUser());
    for (const method of ["POST", "DELETE", "PUT", "PATCH"])
      await expectError(await call(method, "/auth/whoami", bearer(session.token)), 405, "method_not_allowed", {
        allow: "GET, HEAD",
      });
  });
});
