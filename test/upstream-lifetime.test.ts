import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventView } from "../src/domain/event-view.ts";
import { readUpstreams } from "../src/domain/upstreams/config.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  callWith,
  d1OfUser,
  databases,
  expectError,
  newUser,
  tableSnapshot,
} from "./helpers.ts";
import { admin, adminKey, newOrganization } from "./organization-fixtures.ts";
import { ACCESS_TOKEN_AUDIENCE, accessTokenVars, ISSUER } from "./ssf.ts";

// IPSIE SL1, the provider's lifetime: `create`'s upstream sign-in carries the ID token's
// `session_expiry`, `auth_time`, `acr` and `amr`. The session never outlives the provider's
// `session_expiry` (nor does a sliding renewal or an access token), whoami and the security log
// say which bound ends it, and `auth_time`, `amr` and `acr` count as a local sign-in's factors
// and level do.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const MINUTE = 60_000;
const START = Date.UTC(2026, 10, 28, 9, 0, 0);
const seconds = (ms: number) => Math.floor(ms / 1000);
const iso = (ms: number) => new Date(ms).toISOString();

const UPSTREAMS: Partial<Env> = {
  SSF_UPSTREAMS: JSON.stringify([
    {
      issuer: "https://corp.example/realms/acme",
      name: "corp",
      client_id: "sessions-app",
      jwks_uri: "https://corp.example/jwks",
      acr_levels: { "urn:corp:mfa": 2, phr: 3 },
    },
  ]),
};
const SLIDING: Partial<Env> = { SESSION_SLIDING_TTL: "true", SESSION_IDLE_TIMEOUT_SECONDS: "0" };

const service = (vars: Partial<Env> = {}) =>
  new SessionService(createExecutionContext(), { ...env, ...UPSTREAMS, ...vars });

/** A sign-in through corp, as a login flow makes it after the provider's callback. */
function signIn(userId: string, upstream: Record<string, unknown>, more: Record<string, unknown> = {}) {
  return service().create({
    userId,
    userAgent: CHROME_MAC,
    ...more,
    upstream: { provider: "corp", subject: `sub-${userId}`, ...upstream },
  });
}

async function whoami(token: string, vars: Partial<Env> = {}, query = "") {
  const response = await callWith({ ...UPSTREAMS, ...vars }, "GET", `/auth/whoami${query}`, bearer(token));
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function createdReason(token: string): Promise<string | null | undefined> {
  const response = await callWith(UPSTREAMS, "GET", "/auth/events", bearer(token));
  const { events } = (await response.json()) as { events: EventView[] };
  return events.find((event) => event.type === "created")?.reason;
}

describe("the provider's session_expiry bounds the session", () => {
  it("earlier than the session's own end: the session ends then, whoami and the log say so", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const expiry = START + 10 * MINUTE;
    const created = await signIn(userId, { sid: "sid-1", session_expiry: seconds(expiry) }, { ttlSeconds: 3600 });
    expect(created.expiresAt).toBe(iso(expiry));
    expect(created.cookie).toContain("; Max-Age=600;");
    const upstream = {
      provider: "corp",
      subject: `sub-${userId}`,
      sid: "sid-1",
      session_expiry: iso(expiry),
      bound: "session_expiry",
    };
    expect(await whoami(created.token)).toMatchObject({ status: 200, body: { expires_at: iso(expiry), upstream } });
    expect((await service().authenticate(created.token))?.upstream).toEqual(upstream);
    expect((await service().listUserSessions(userId))[0]?.upstream).toEqual(upstream);
    expect(await createdReason(created.token)).toBe("corp:session_expiry");

    vi.setSystemTime(expiry - 1);
    expect((await whoami(created.token)).status).toBe(200);
    vi.setSystemTime(expiry);
    await expectError(await callWith(UPSTREAMS, "GET", "/auth/whoami", bearer(created.token)), 401, "invalid_token", {
      wwwAuthenticate: 'Bearer realm="auth", error="invalid_token"',
    });
    expect(await service().authenticate(created.token)).toBeNull();
  });

  it("later than the session's own end: its own lifetime ends it, whoami says `session`, the log no reason", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const expiry = START + 3 * 86_400_000;
    const created = await signIn(newUser(), { session_expiry: seconds(expiry) }, { ttlSeconds: 3600 });
    expect(created.expiresAt).toBe(iso(START + 3600_000));
    expect((await whoami(created.token)).body.upstream).toMatchObject({
      session_expiry: iso(expiry),
      bound: "session",
    });
    expect(await createdReason(created.token)).toBeNull();
  });

  it("a sliding renewal never passes it, in the request's one round trip", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const expiry = START + 120 * MINUTE;
    const created = await signIn(userId, { session_expiry: seconds(expiry) }, { ttlSeconds: 3600 });
    const renewedTo = async () => (await whoami(created.token, SLIDING)).body;

    vi.setSystemTime(START + 30 * MINUTE);
    const counter = countingShards(databases());
    const first = await callWith(
      { ...UPSTREAMS, ...SLIDING, ...counter.env },
      "GET",
      "/auth/whoami",
      bearer(created.token),
    );
    expect(first.status).toBe(200);
    expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 1 });
    expect(await renewedTo()).toMatchObject({
      expires_at: iso(START + 90 * MINUTE),
      upstream: { bound: "session" },
    });
    // Renewed to now + an hour it would end at 140 minutes; the provider's ends it at 120.
    vi.setSystemTime(START + 80 * MINUTE);
    expect(await renewedTo()).toMatchObject({ expires_at: iso(expiry), upstream: { bound: "session_expiry" } });
    vi.setSystemTime(START + 110 * MINUTE);
    expect(await renewedTo()).toMatchObject({ expires_at: iso(expiry) });
    vi.setSystemTime(expiry);
    expect((await whoami(created.token, SLIDING)).status).toBe(401);
  });

  it("an access token never outlives it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const vars = { ...UPSTREAMS, ...(await accessTokenVars()) };
    const expiry = START + MINUTE;
    const created = await signIn(newUser(), { session_expiry: seconds(expiry) });
    const minted = await callWith(vars, "POST", "/auth/token", bearer(created.token));
    const { access_token, expires_in } = (await minted.json()) as { access_token: string; expires_in: number };
    // ACCESS_TOKEN_TTL_SECONDS is 120 here: without the provider's bound it would end a minute later.
    expect(expires_in).toBe(60);
    const keys = (await (await callWith(vars, "GET", "/.well-known/jwks.json")).json()) as JSONWebKeySet;
    const verify = () =>
      jwtVerify(access_token, createLocalJWKSet(keys), { issuer: ISSUER, audience: ACCESS_TOKEN_AUDIENCE });
    expect((await verify()).payload.exp).toBe(seconds(expiry));
    vi.setSystemTime(expiry);
    await expect(verify()).rejects.toThrow('"exp" claim timestamp check failed');
    expect((await callWith(vars, "POST", "/auth/token", bearer(created.token))).status).toBe(401);
  });
});

describe("auth_time and amr are the sign-in's factors; acr its level", () => {
  const STEP_UP: Partial<Env> = { SESSION_STEP_UP_MAX_AGE_SECONDS: "600" };

  it("auth_time is when the user proved who they are: freshness and step-up judge by it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const stale = await signIn(userId, { auth_time: seconds(START - 20 * MINUTE), amr: ["pwd", "otp", "ngcmfa"] });
    const fresh = await signIn(userId, { auth_time: seconds(START - MINUTE), amr: ["hwk"] });
    const other = await signIn(userId, {});
    expect(await whoami(stale.token, {}, "?max_age=600")).toMatchObject({
      status: 200,
      body: { authenticated_at: iso(START - 20 * MINUTE), amr: ["pwd", "otp"], fresh: false },
    });
    expect((await service().authenticate(stale.token))?.factors).toEqual([
      { factor: "pwd", completedAt: iso(START - 20 * MINUTE) },
      { factor: "otp", completedAt: iso(START - 20 * MINUTE) },
    ]);
    expect(await whoami(fresh.token, {}, "?max_age=600")).toMatchObject({
      body: { authenticated_at: iso(START - MINUTE), amr: ["hwk"], fresh: true },
    });
    await expectError(
      await callWith({ ...UPSTREAMS, ...STEP_UP }, "DELETE", `/auth/sessions/${other.id}`, bearer(stale.token)),
      401,
      "reauthentication_required",
      {
        wwwAuthenticate:
          'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="600"',
      },
    );
    const ended = await callWith(
      { ...UPSTREAMS, ...STEP_UP },
      "DELETE",
      `/auth/sessions/${other.id}`,
      bearer(fresh.token),
    );
    expect(ended.status).toBe(200);
  });

  it("auth_time without a known method is `sso`; amr without auth_time is completed now; neither: as before", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const noMethod = await signIn(userId, { auth_time: seconds(START - 5 * MINUTE), amr: ["x-corp-push"] });
    expect((await whoami(noMethod.token)).body).toMatchObject({
      authenticated_at: iso(START - 5 * MINUTE),
      amr: ["sso"],
    });
    const noTime = await signIn(userId, { amr: ["pwd"] });
    expect((await whoami(noTime.token)).body).toMatchObject({ authenticated_at: iso(START), amr: ["pwd"] });
    const neither = await signIn(userId, {});
    expect((await whoami(neither.token)).body).toMatchObject({ authenticated_at: iso(START), amr: [] });
    // The login flow's own factors count beside the provider's: the later proof is the sign-in's.
    const both = await signIn(
      userId,
      { auth_time: seconds(START - 5 * MINUTE), amr: ["pwd"] },
      { factors: ["webauthn"] },
    );
    expect((await whoami(both.token)).body).toMatchObject({ authenticated_at: iso(START), amr: ["pwd", "webauthn"] });
  });

  it("acr is the level the upstream's acr_levels gives it; one not listed, none; assuranceLevel, when given, wins", async () => {
    const userId = newUser();
    const level = async (upstream: Record<string, unknown>, more: Record<string, unknown> = {}) =>
      (await whoami((await signIn(userId, upstream, more)).token)).body.assurance_level;
    expect(await level({ acr: "urn:corp:mfa" })).toBe(2);
    expect(await level({ acr: "phr" })).toBe(3);
    expect(await level({ acr: "urn:corp:unknown" })).toBeNull();
    expect(await level({ acr: "constructor" })).toBeNull();
    expect(await level({})).toBeNull();
    expect(await level({ acr: "urn:corp:mfa" }, { assuranceLevel: 1 })).toBe(1);
  });

  it("acr_levels in SSF_UPSTREAMS: an object of acr values to 1, 2 or 3, else the var is refused", () => {
    const entry = { issuer: "https://x.example", name: "x", client_id: "c", jwks_uri: "https://x.example/jwks" };
    expect(readUpstreams({ SSF_UPSTREAMS: JSON.stringify([entry]) })[0]?.acrLevels).toEqual({});
    for (const acr_levels of [{ gold: 4 }, ["gold"], { gold: "2" }, "gold"])
      expect(() => readUpstreams({ SSF_UPSTREAMS: JSON.stringify([{ ...entry, acr_levels }]) })).toThrow(
        "SSF_UPSTREAMS must be a JSON array of upstreams: acr_levels, when given, is an object from acr values to 1, 2 or 3",
      );
  });
});

describe("bad values are refused with nothing written", () => {
  const NUMBER = "upstream.session_expiry, when given, must be a whole number of seconds since the epoch";
  const RANGE = "upstream.session_expiry must be after now and at most 34560000 seconds (400 days) away";
  const AUTH_NUMBER = "upstream.auth_time, when given, must be a whole number of seconds since the epoch";
  const AUTH_RANGE =
    "upstream.auth_time must not be ahead of now by more than 60 seconds, nor older than 34560000 seconds (400 days)";
  const AMR =
    "upstream.amr, when given, must be an array of at most 20 strings of 1 to 32 characters without control characters";
  const ACR = "upstream.acr, when given, must be a string of 1 to 255 characters without control characters";
  const now = seconds(START);
  const refusals: [string, Record<string, unknown>, "TypeError" | "RangeError", string][] = [
    ["session_expiry a string", { session_expiry: String(now + 600) }, "TypeError", NUMBER],
    ["session_expiry a fraction", { session_expiry: now + 600.5 }, "TypeError", NUMBER],
    ["session_expiry in milliseconds", { session_expiry: (now + 600) * 1000 }, "RangeError", RANGE],
    ["session_expiry in the past", { session_expiry: now - 1 }, "RangeError", RANGE],
    ["session_expiry now", { session_expiry: now }, "RangeError", RANGE],
    ["session_expiry over 400 days away", { session_expiry: now + 400 * 86_400 + 1 }, "RangeError", RANGE],
    ["auth_time a string", { auth_time: "yesterday" }, "TypeError", AUTH_NUMBER],
    ["auth_time negative", { auth_time: -5 }, "TypeError", AUTH_NUMBER],
    ["auth_time over a minute ahead", { auth_time: now + 61 }, "RangeError", AUTH_RANGE],
    ["auth_time over 400 days old", { auth_time: now - 400 * 86_400 - 1 }, "RangeError", AUTH_RANGE],
    ["amr a string", { amr: "pwd" }, "TypeError", AMR],
    ["amr with a number", { amr: ["pwd", 1] }, "TypeError", AMR],
    ["amr with a long value", { amr: ["p".repeat(33)] }, "TypeError", AMR],
    ["amr with an empty value", { amr: [""] }, "TypeError", AMR],
    ["amr of 21 values", { amr: Array(21).fill("pwd") }, "TypeError", AMR],
    ["acr a number", { acr: 2 }, "TypeError", ACR],
    ["acr over 255 characters", { acr: "a".repeat(256) }, "TypeError", ACR],
  ];

  async function nothingWritten(userId: string) {
    const db = await d1OfUser(userId);
    const sessions = await db.prepare("SELECT id FROM sessions WHERE user_id = ?").bind(userId).all();
    const events = await db.prepare("SELECT id FROM session_events WHERE user_id = ?").bind(userId).all();
    expect([sessions.results, events.results]).toEqual([[], []]);
    const links = await Promise.all(
      Object.values(databases()).map((d1) =>
        d1.prepare("SELECT subject FROM upstream_links WHERE subject = ?").bind(`sub-${userId}`).all(),
      ),
    );
    expect(links.flatMap((link) => link.results)).toEqual([]);
  }

  it.each(refusals)("%s: the RPC throws, naming the rule", async (_, upstream, kind, message) => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    let thrown: unknown;
    try {
      await signIn(userId, upstream);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(kind === "TypeError" ? TypeError : RangeError);
    expect(String(thrown)).toBe(`${kind}: ${message}`);
    await nothingWritten(userId);
  });

  it.each(refusals)("%s: reauthenticate throws the same, changing nothing", async (_, upstream, kind, message) => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const created = await signIn(userId, {});
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    let thrown: unknown;
    try {
      await service().reauthenticate({
        token: created.token,
        factors: ["pwd"],
        upstream: { provider: "corp", subject: `sub-${userId}`, ...upstream },
      });
    } catch (error) {
      thrown = error;
    }
    expect(String(thrown)).toBe(`${kind}: ${message}`);
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
  });

  it("the admin API answers each 400 invalid_input with the same sentence", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const { newAdminKey } = await import("../src/domain/admin-keys.ts");
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const vars = { ...UPSTREAMS, ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>;
    for (const [, upstream, , message] of refusals) {
      const userId = newUser();
      const response = await callWith(
        vars,
        "POST",
        "/admin/sessions",
        { ...bearer(key), "Content-Type": "application/json" },
        JSON.stringify({ userId, upstream: { provider: "corp", subject: `sub-${userId}`, ...upstream } }),
      );
      expect({ status: response.status, body: await response.json() }).toEqual({
        status: 400,
        body: { code: "invalid_input", message: expect.any(String), detail: message },
      });
      await nothingWritten(userId);
    }
    const userId = newUser();
    const accepted = await callWith(
      vars,
      "POST",
      "/admin/sessions",
      { ...bearer(key), "Content-Type": "application/json" },
      JSON.stringify({
        userId,
        upstream: { provider: "corp", subject: "s", session_expiry: seconds(START) + 600, auth_time: seconds(START) },
      }),
    );
    expect(accepted.status).toBe(201);
    expect(((await accepted.json()) as { expiresAt: string }).expiresAt).toBe(iso(START + 600_000));
  });
});

describe("reauthenticate takes the provider's fresh sign-in", () => {
  const MAX: Partial<Env> = { SESSION_TTL_SECONDS: "3600", SESSION_MAX_LIFETIME_SECONDS: "7200" };
  const cookieOf = (token: string, maxAge: number) =>
    `__Host-session=${token}; Max-Age=${maxAge}; Path=/; HttpOnly; Secure; SameSite=Lax`;
  const fresh = (userId: string, upstream: Record<string, unknown>) => ({
    provider: "corp",
    subject: `sub-${userId}`,
    ...upstream,
  });

  it("its auth_time and amr are the factors, its acr the level, its sid the session's; no local factor needed", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const created = await signIn(userId, { sid: "sid-1", auth_time: seconds(START - 5 * MINUTE), amr: ["pwd"] });
    vi.setSystemTime(START + 30 * MINUTE);
    const upstream = fresh(userId, {
      sid: "sid-2",
      auth_time: seconds(START + 29 * MINUTE),
      amr: ["hwk"],
      acr: "urn:corp:mfa",
    });
    const reissued = await service().reauthenticate({ token: created.token, upstream });
    // No session_expiry: the session's end is as it was.
    expect(reissued).toEqual({
      sessionId: created.id,
      token: expect.any(String),
      expiresAt: created.expiresAt,
      cookie: cookieOf(reissued?.token as string, seconds(Date.parse(created.expiresAt) - START - 30 * MINUTE)),
    });
    expect(await whoami(reissued?.token as string)).toMatchObject({
      status: 200,
      body: {
        authenticated_at: iso(START + 29 * MINUTE),
        amr: ["pwd", "hwk"],
        assurance_level: 2,
        upstream: { provider: "corp", subject: `sub-${userId}`, sid: "sid-2" },
      },
    });
    expect((await service().authenticate(reissued?.token as string))?.factors).toEqual([
      { factor: "pwd", completedAt: iso(START - 5 * MINUTE) },
      { factor: "hwk", completedAt: iso(START + 29 * MINUTE) },
    ]);
  });

  it("a new session_expiry bounds the session anew: a later one extends it up to its own end, an earlier one shortens it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const userId = newUser();
    const created = await signIn(userId, { session_expiry: seconds(START + 10 * MINUTE) }, { ttlSeconds: 3600 });
    let token = created.token;
    const reauthenticate = async (at: number, expiry: number) => {
      vi.setSystemTime(at);
      const counter = countingShards(databases());
      const reissued = await new SessionService(createExecutionContext(), {
        ...env,
        ...UPSTREAMS,
        ...counter.env,
      }).reauthenticate({ token, factors: ["otp"], upstream: fresh(userId, { session_expiry: seconds(expiry) }) });
      expect(counter.roundTrips()).toEqual({ [await bindingOfUser(userId)]: 1 });
      token = reissued?.token as string;
      return {
        expiresAt: reissued?.expiresAt,
        cookie: reissued?.cookie,
        upstream: (await whoami(token)).body.upstream,
      };
    };
    expect(await reauthenticate(START + 5 * MINUTE, START + 20 * MINUTE)).toEqual({
      expiresAt: iso(START + 20 * MINUTE),
      cookie: cookieOf(token, 15 * 60),
      upstream: expect.objectContaining({ session_expiry: iso(START + 20 * MINUTE), bound: "session_expiry" }),
    });
    // Three hours away: the session's own end (created + an hour) comes first.
    expect(await reauthenticate(START + 6 * MINUTE, START + 180 * MINUTE)).toEqual({
      expiresAt: iso(START + 60 * MINUTE),
      cookie: cookieOf(token, 54 * 60),
      upstream: expect.objectContaining({ session_expiry: iso(START + 180 * MINUTE), bound: "session" }),
    });
    expect(await reauthenticate(START + 7 * MINUTE, START + 8 * MINUTE)).toMatchObject({
      expiresAt: iso(START + 8 * MINUTE),
      upstream: expect.objectContaining({ bound: "session_expiry" }),
    });
    vi.setSystemTime(START + 8 * MINUTE);
    expect((await whoami(token)).status).toBe(401);
  });

  it("with a sliding lifetime: its own end renewed now, never past the maximum lifetime; the cookie ends with the session", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const vars = { ...SLIDING, ...MAX };
    const userId = newUser();
    const created = await service(vars).create({
      userId,
      ttlSeconds: 3600,
      upstream: fresh(userId, { session_expiry: seconds(START + 10 * MINUTE) }),
    });
    // The provider's session_expiry, sooner than the maximum lifetime, is the cookie's end.
    expect(created.cookie).toBe(cookieOf(created.token, 600));
    const reauthenticate = async (at: number, token: string, expiry: number) => {
      vi.setSystemTime(at);
      const upstream = fresh(userId, { session_expiry: seconds(expiry) });
      const reissued = await service(vars).reauthenticate({ token, factors: ["otp"], upstream });
      return reissued as NonNullable<typeof reissued>;
    };
    const renewed = await reauthenticate(START + 5 * MINUTE, created.token, START + 300 * MINUTE);
    expect(renewed).toMatchObject({ expiresAt: iso(START + 65 * MINUTE), cookie: cookieOf(renewed.token, 7200) });
    const capped = await reauthenticate(START + 60 * MINUTE, renewed.token, START + 300 * MINUTE);
    expect(capped).toMatchObject({ expiresAt: iso(START + 120 * MINUTE), cookie: cookieOf(capped.token, 7200) });
    const sooner = await reauthenticate(START + 70 * MINUTE, capped.token, START + 80 * MINUTE);
    expect(sooner).toMatchObject({ expiresAt: iso(START + 80 * MINUTE), cookie: cookieOf(sooner.token, 600) });
    // Without a session_expiry the cookie lasts the maximum lifetime, as it always has.
    vi.setSystemTime(START);
    const local = await service(vars).create({ userId, ttlSeconds: 3600 });
    expect(local.cookie).toBe(cookieOf(local.token, 7200));
  });

  it("a member's session renews by its organization's sliding, not the var's: on where the var is off, off where it is on", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const [slides, fixed] = [await newOrganization(), await newOrganization()];
    const { vars: keys, key } = await adminKey();
    for (const [organization, slidingTtl] of [
      [slides, true],
      [fixed, false],
    ] as const) {
      const path = `/admin/organizations/${organization}/policy`;
      expect((await admin({ ...keys, ...MAX }, key, "PUT", path, { slidingTtl })).status).toBe(200);
    }
    const reauthenticated = async (organization: string, vars: Partial<Env>) => {
      vi.setSystemTime(START);
      const userId = newUser();
      const upstream = fresh(userId, { session_expiry: seconds(START + 10 * MINUTE) });
      const created = await service(vars).create({ userId, ttlSeconds: 3600, organization, upstream });
      vi.setSystemTime(START + 5 * MINUTE);
      const later = fresh(userId, { session_expiry: seconds(START + 300 * MINUTE) });
      const reissued = await service(vars).reauthenticate({ token: created.token, factors: ["otp"], upstream: later });
      return reissued?.expiresAt;
    };
    // Renewed now: now + its hour. The var does not slide.
    expect(await reauthenticated(slides, MAX)).toBe(iso(START + 65 * MINUTE));
    // Its own end, created + its hour, past the former session_expiry. The var slides.
    expect(await reauthenticated(fixed, { ...SLIDING, ...MAX })).toBe(iso(START + 60 * MINUTE));
  });

  it("another provider's subject, or a session signed in here, is refused with nothing written", async () => {
    const { newAdminKey } = await import("../src/domain/admin-keys.ts");
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const vars = { ...UPSTREAMS, ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>;
    const SENTENCE = "upstream.provider and upstream.subject must be those the session was signed in through";
    const userId = newUser();
    const federated = await signIn(userId, { sid: "sid-1" });
    const local = await service().create({ userId });
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    for (const [token, subject] of [
      [federated.token, "sub-someone-else"],
      [local.token, `sub-${userId}`],
    ] as const) {
      const upstream = { provider: "corp", subject, sid: "sid-2", amr: ["pwd"] };
      let thrown: unknown;
      try {
        await service().reauthenticate({ token, upstream });
      } catch (error) {
        thrown = error;
      }
      expect(String(thrown)).toBe(`RangeError: ${SENTENCE}`);
      const response = await callWith(
        vars,
        "POST",
        "/admin/sessions/reauthenticate",
        { ...bearer(key), "Content-Type": "application/json" },
        JSON.stringify({ token, upstream }),
      );
      expect({ status: response.status, body: await response.json() }).toEqual({
        status: 400,
        body: { code: "invalid_input", message: expect.any(String), detail: SENTENCE },
      });
    }
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    expect((await whoami(federated.token)).status).toBe(200);
    expect((await whoami(local.token)).status).toBe(200);
  });
});
