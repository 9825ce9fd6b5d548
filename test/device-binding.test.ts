import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { exportJWK, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { SessionCarrier } from "../src/domain/carrier.ts";
import type { ErrorCode } from "../src/http/error-codes.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards } from "./d1.ts";
import { type Alg, challengeIn, type DeviceKey, deviceKey, signProof } from "./device-keys.ts";
import {
  bearer,
  CHROME_MAC,
  CLEARED_COOKIE,
  COOKIE_NAME,
  CRIT_HEADERS,
  call,
  callWith,
  d1OfUser,
  databases,
  expectError,
  expectMessage,
  expectSecurityHeaders,
  FIREFOX_WINDOWS,
  type Issued,
  isLive,
  issue,
  newUser,
  ORIGIN,
  REJECTED_CHALLENGE,
  tableSnapshot,
} from "./helpers.ts";
import { accessTokenVars } from "./ssf.ts";

// Device Bound Session Credentials through the public interface: a stand-in browser
// (test/device-keys.ts) registers and refreshes as Chrome does, and everything else is asked
// with and without the bound cookie.

const BOUND = `${COOKIE_NAME}-bound`;
const CLEARED_BOUND = `${BOUND}=; Max-Age=0; Path=/; HttpOnly; Secure; SameSite=Lax`;
const REGISTRATION = /^\(ES256 RS256\);path="\/auth\/dbsc\/registration";challenge="[A-Za-z0-9_-]{22}"$/;

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/**
 * A proof by an RSA device key under `alg`, an algorithm DBSC's ES256 and RS256 leave out: jose
 * signs it with the key's private JWK, which carries no alg.
 */
async function signProofAs(key: DeviceKey, alg: "PS256" | "RS384", challenge: string, withKey = false) {
  return new SignJWT({ jti: challenge })
    .setProtectedHeader({ alg, typ: "dbsc+jwt", ...(withKey ? { jwk: key.publicJwk } : {}) })
    .sign(await exportJWK(key.privateKey));
}

const total = (perBinding: Record<string, number>) => Object.values(perBinding).reduce((sum, n) => sum + n, 0);

interface BoundSession extends Issued {
  user: string;
  key: DeviceKey;
  identifier: string;
  /** The live bound cookie's value. */
  bound: string;
  /** The challenge the next refresh proof must sign. */
  next: string;
}

/** `carrier` null: issued without one. */
async function issueBindable(user = newUser(), carrier: SessionCarrier | null = "cookie") {
  const issued = (await exports.SessionService.create({
    userId: user,
    // A browser's session, as the login worker issues it, from the browser the requests below come
    // from: registration judges the context like any use of its cookie.
    userAgent: CHROME_MAC,
    deviceBound: true,
    ...(carrier === null ? {} : { carrier }),
  })) as Issued & {
    secureSessionRegistration: string;
    boundCookie: string;
  };
  return { ...issued, user };
}

const cookies = (token: string, bound?: string) => ({
  Cookie: bound === undefined ? `${COOKIE_NAME}=${token}` : `${COOKIE_NAME}=${token}; ${BOUND}=${bound}`,
});

function register(token: string, proof: string | undefined) {
  return call("POST", "/auth/dbsc/registration", {
    ...cookies(token),
    ...(proof === undefined ? {} : { "Secure-Session-Response": `"${proof}"` }),
  });
}

function refresh(token: string, identifier: string, proof?: string, headers: Record<string, string> = {}) {
  return call("POST", "/auth/dbsc/refresh", {
    ...cookies(token),
    "Sec-Secure-Session-Id": `"${identifier}"`,
    ...(proof === undefined ? {} : { "Secure-Session-Response": proof }),
    ...headers,
  });
}

const boundCookieOf = (response: Response) => boundCookieIn(response.headers.get("Set-Cookie"));

function boundCookieIn(setCookie: string | null | undefined): string {
  const match = new RegExp(`^${BOUND}=([A-Za-z0-9_-]{43}); Max-Age=600; Path=/; HttpOnly; Secure; SameSite=Lax$`).exec(
    setCookie ?? "",
  );
  if (!match) throw new Error(`no bound cookie in ${setCookie}`);
  return match[1] as string;
}

async function bindSession(alg: Alg = "ES256", user?: string, carrier?: SessionCarrier | null): Promise<BoundSession> {
  const issued = await issueBindable(user, carrier);
  const key = await deviceKey(alg);
  const response = await register(
    issued.token,
    await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true }),
  );
  expect(response.status).toBe(200);
  const body = (await response.json()) as { session_identifier: string };
  return {
    ...issued,
    key,
    identifier: body.session_identifier,
    bound: boundCookieIn(issued.boundCookie),
    next: challengeIn(response.headers.get("Secure-Session-Challenge")),
  };
}

async function row(user: string, id: string) {
  return (await d1OfUser(user)).prepare("SELECT * FROM sessions WHERE id = ?").bind(id).first();
}

describe("device-bound sessions: issuing", () => {
  it("create({deviceBound: true}) adds the registration header value and the first bound cookie; without it nothing changes", async () => {
    const bindable = await issueBindable();
    expect(bindable.secureSessionRegistration).toMatch(REGISTRATION);
    boundCookieIn(bindable.boundCookie);
    // Not bound yet: the token alone still works, as for any session.
    expect(await exports.SessionService.authenticate(bindable.token)).not.toBeNull();
    const plain = { ...(await exports.SessionService.create({ userId: newUser() })) };
    // A new user's first sign-in is a new device: its report token (test/report.test.ts) too.
    expect(Object.keys(plain).sort()).toEqual(["cookie", "expiresAt", "id", "newDevice", "reportToken", "token"]);
    const declined = await exports.SessionService.create({ userId: newUser(), deviceBound: false });
    expect(declined.secureSessionRegistration).toBeUndefined();
    expect(declined.boundCookie).toBeUndefined();
    // Called in-process: a rejection through the RPC stub is reported by the pool as uncaught.
    const service = new SessionService(createExecutionContext(), env);
    await expect(service.create({ userId: newUser(), deviceBound: "yes" as unknown as boolean })).rejects.toThrow(
      "deviceBound must be a boolean",
    );
  });
});

describe("device-bound sessions: registration", () => {
  for (const alg of ["ES256", "RS256"] as const) {
    it(`binds with an ${alg} proof: instructions, next challenge, a device_bound event; the login's bound cookie counts`, async () => {
      const issued = await issueBindable();
      const key = await deviceKey(alg);
      const challenge = challengeIn(issued.secureSessionRegistration);
      const response = await register(issued.token, await signProof(key, challenge, { withKey: true }));
      expect(response.status).toBe(200);
      const body = (await response.json()) as { session_identifier: string };
      expect(body).toEqual({
        session_identifier: body.session_identifier,
        refresh_url: "/auth/dbsc/refresh",
        scope: { include_site: false },
        credentials: [{ type: "cookie", name: BOUND, attributes: "Path=/; Secure; HttpOnly; SameSite=Lax" }],
      });
      expect(body.session_identifier.startsWith(`${issued.id}.`)).toBe(true);
      // No new cookie: requests sent while the browser registered carry the login's, which stays good.
      expect(response.headers.get("Set-Cookie")).toBeNull();
      expect(await exports.SessionService.authenticate(issued.token)).toBeNull();
      const bound = boundCookieIn(issued.boundCookie);
      expect(
        await exports.SessionService.authenticate(issued.token, { cookie: cookies(issued.token, bound).Cookie }),
      ).not.toBeNull();
      const next = challengeIn(response.headers.get("Secure-Session-Challenge"));
      expect(response.headers.get("Secure-Session-Challenge")).toBe(`"${next}";id="${body.session_identifier}"`);
      expect(next).not.toBe(challenge);
      expect(response.headers.get("Cache-Control")).toBe("no-store");
      expectSecurityHeaders(response);

      // Listed as device-bound (only bound sessions carry the field); logged, with the actor.
      const other = await issue(issued.user);
      const list = (await (await call("GET", "/auth/sessions", bearer(other.token))).json()) as {
        sessions: Record<string, unknown>[];
      };
      expect(list.sessions.find((s) => s.id === issued.id)?.device_bound).toBe(true);
      expect(list.sessions.find((s) => s.id === other.id)).not.toHaveProperty("device_bound");
      const events = (await (await call("GET", "/auth/events", bearer(other.token))).json()) as {
        events: { type: string; session_id: string; actor_session_id: string }[];
      };
      expect(events.events.filter((e) => e.type === "device_bound")).toMatchObject([
        { session_id: issued.id, actor_session_id: issued.id },
      ]);
      const rpcList = await exports.SessionService.listUserSessions(issued.user);
      expect(rpcList.find((s) => s.id === issued.id)?.device_bound).toBe(true);
    });
  }

  it("accepts the proof unquoted, and a payload with only jti", async () => {
    const issued = await issueBindable();
    const key = await deviceKey();
    const proof = await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true });
    const response = await call("POST", "/auth/dbsc/registration", {
      ...cookies(issued.token),
      "Secure-Session-Response": proof,
    });
    expect(response.status).toBe(200);
  });

  it("refuses a bad proof with 400 and changes nothing: signature, typ, algorithm, key, challenge, crit", async () => {
    const issued = await issueBindable();
    const challenge = challengeIn(issued.secureSessionRegistration);
    const key = await deviceKey();
    const other = await deviceKey();
    const rsa = await deviceKey("RS256");
    const badSignature = await signProof(other, challenge, { withKey: true, header: { jwk: key.publicJwk } });
    const valid = await signProof(key, challenge, { withKey: true });
    const [h, , sig] = valid.split(".") as [string, string, string];
    const cases: Record<string, string | undefined> = {
      "no proof": undefined,
      "not a JWT": "abc",
      "signed by another key than its jwk": badSignature,
      "typ jwt": await signProof(key, challenge, { withKey: true, header: { typ: "JWT" } }),
      "alg none": await signProof(key, challenge, { withKey: true, header: { alg: "none" } }),
      "RS256 claimed for an EC key": await signProof(key, challenge, { withKey: true, header: { alg: "RS256" } }),
      // Refused twice over: by jose's allow-list of ES256 and RS256, and by the key's own check
      // (publicKeyOf takes an RSA jwk for RS256 only). At refresh the allow-list stands alone (below).
      "PS256 by an RSA key in its jwk": await signProofAs(rsa, "PS256", challenge, true),
      "RS384 by an RSA key in its jwk": await signProofAs(rsa, "RS384", challenge, true),
      "no jwk": await signProof(key, challenge),
      "a jwk off the curve": await signProof(key, challenge, {
        header: { jwk: { kty: "EC", crv: "P-256", x: "A".repeat(43), y: "A".repeat(43) } },
      }),
      "no jti": await signProof(key, challenge, { withKey: true, payload: { jti: undefined } }),
      "a challenge never issued": await signProof(key, "A".repeat(22), { withKey: true }),
      "tampered payload": `${h}.${btoa(JSON.stringify({ jti: challenge, x: 1 })).replace(/=+$/, "")}.${sig}`,
    };
    for (const [name, header] of Object.entries(CRIT_HEADERS))
      cases[name] = await signProof(key, challenge, { withKey: true, header });
    const before = [await tableSnapshot(), await tableSnapshot("session_events")];
    for (const [name, proof] of Object.entries(cases)) {
      const response = await register(issued.token, proof);
      expect(response.status, name).toBe(400);
      await expectError(response, 400, "device_proof_invalid");
    }
    expect([await tableSnapshot(), await tableSnapshot("session_events")]).toEqual(before);
    // Still bindable with the good proof afterwards: the challenge was not used up by refusals.
    expect((await register(issued.token, valid)).status).toBe(200);
  });

  it("a fault while verifying that is not the proof's (a key import that throws) is a 500 with its log line, never a 400", async () => {
    const issued = await issueBindable();
    const key = await deviceKey();
    const proof = await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true });
    const lines = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(crypto.subtle, "importKey").mockRejectedValue(new Error("planted"));
    await expectError(await register(issued.token, proof), 500, "internal_error");
    expect(lines.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual(
      expect.objectContaining({ event: "unhandled_error", name: "Error", route: "/auth/dbsc/registration" }),
    );
  });

  it("a challenge binds once: the same proof again is 409, another session's challenge is 400", async () => {
    const issued = await issueBindable();
    const key = await deviceKey();
    const proof = await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true });
    expect((await register(issued.token, proof)).status).toBe(200);
    await expectError(await register(issued.token, proof), 409, "device_already_bound");
    const second = await issueBindable();
    const response = await register(second.token, proof);
    await expectError(response, 400, "device_proof_invalid");
    const unbindable = await issue(newUser());
    await expectError(
      await register(
        unbindable.token,
        await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true }),
      ),
      400,
      "device_proof_invalid",
    );
  });

  it("needs a live session cookie: none 401 token_required, ended 401 invalid_token", async () => {
    const issued = await issueBindable();
    const proof = await signProof(await deviceKey(), challengeIn(issued.secureSessionRegistration), { withKey: true });
    await expectError(
      await call("POST", "/auth/dbsc/registration", { "Secure-Session-Response": proof }),
      401,
      "token_required",
      { wwwAuthenticate: 'Bearer realm="auth"' },
    );
    await exports.SessionService.endSession({ sessionId: issued.id, reason: "admin" });
    await expectError(await register(issued.token, proof), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
  });

  it("an app's token (carrier bearer) sent as the session cookie names no session: registration 401 invalid_token, refresh ends", async () => {
    const app = await issue(newUser(), { carrier: "bearer" });
    const proof = await signProof(await deviceKey(), "no-challenge", { withKey: true });
    // A well-formed identifier: the app's session id beside a real key.
    const identifier = `${app.id}.${(await bindSession()).identifier.split(".")[1]}`;
    const before = await tableSnapshot();
    await expectError(await register(app.token, proof), 401, "invalid_token", { wwwAuthenticate: REJECTED_CHALLENGE });
    const refreshed = await refresh(app.token, identifier);
    expect(await refreshed.json()).toEqual({ session_identifier: identifier, continue: false });
    expect(refreshed.headers.get("Set-Cookie")).toBe(`${CLEARED_COOKIE}, ${CLEARED_BOUND}`);
    expect(await tableSnapshot()).toEqual(before);
  });
});

describe("device-bound sessions: registration judges the caller's context", () => {
  const STEP_UP =
    'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';

  it("a copied cookie registering from another browser is held (401 reauthentication_required): no key bound, the owner's too until reauthenticate", async () => {
    const issued = await issueBindable();
    const challenge = challengeIn(issued.secureSessionRegistration);
    const thiefProof = await signProof(await deviceKey(), challenge, { withKey: true });
    const fromThief = await call("POST", "/auth/dbsc/registration", {
      ...cookies(issued.token),
      "Secure-Session-Response": `"${thiefProof}"`,
      "User-Agent": FIREFOX_WINDOWS,
    });
    await expectError(fromThief, 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    expect(await row(issued.user, issued.id)).toMatchObject({
      dbsc_key_thumbprint: null,
      dbsc_challenge: challenge,
      context_step_up: 1,
    });
    // Held: the owner's browser binds nothing either, until it signs in again.
    const ownerProof = await signProof(await deviceKey(), challenge, { withKey: true });
    await expectError(await register(issued.token, ownerProof), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    const events = (
      await (
        await d1OfUser(issued.user)
      )
        .prepare("SELECT type, reason FROM session_events WHERE session_id = ? ORDER BY id")
        .bind(issued.id)
        .all()
    ).results;
    expect(events).toEqual([
      { type: "created", reason: null },
      { type: "context_changed", reason: "hold" },
      { type: "context_changed", reason: "hold" },
    ]);
  });

  it("under SESSION_CONTEXT_DEVICE=end the copied cookie's registration ends the session: 401 invalid_token", async () => {
    const issued = await issueBindable();
    const proof = await signProof(await deviceKey(), challengeIn(issued.secureSessionRegistration), { withKey: true });
    const headers = {
      ...cookies(issued.token),
      "Secure-Session-Response": `"${proof}"`,
      "User-Agent": FIREFOX_WINDOWS,
    };
    const response = await callWith({ SESSION_CONTEXT_DEVICE: "end" }, "POST", "/auth/dbsc/registration", headers);
    await expectError(response, 401, "invalid_token", { wwwAuthenticate: REJECTED_CHALLENGE });
    expect(await row(issued.user, issued.id)).toBeNull();
  });
});

describe("device-bound sessions: the token alone proves nothing", () => {
  it("refuses Bearer, the cookie without a live bound cookie, and a stale one; accepts cookie + bound cookie", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-25T10:00:00.000Z"));
    const session = await bindSession();
    await expectError(await call("GET", "/auth/sessions", bearer(session.token)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    await expectError(await call("GET", "/auth/events", bearer(session.token)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    await expectError(
      await call("DELETE", `/auth/sessions/${session.id}`, bearer(session.token)),
      401,
      "invalid_token",
      {
        wwwAuthenticate: REJECTED_CHALLENGE,
      },
    );
    await expectError(await call("POST", "/auth/logout", bearer(session.token)), 400, "session_invalid");
    await expectError(await call("DELETE", "/auth/logout", cookies(session.token)), 401, "session_invalid", {
      setCookie: CLEARED_COOKIE,
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    await expectError(
      await call("POST", "/auth/logout", cookies(session.token, "x".repeat(43))),
      400,
      "session_invalid",
      { setCookie: CLEARED_COOKIE },
    );
    expect(await exports.SessionService.authenticate(session.token)).toBeNull();
    const withCookie = await exports.SessionService.authenticate(session.token, {
      cookie: cookies(session.token, session.bound).Cookie,
    });
    expect(withCookie).toMatchObject({ sessionId: session.id, userId: session.user });
    const service = new SessionService(createExecutionContext(), env);
    await expect(service.authenticate(session.token, { cookie: 1 as unknown as string })).rejects.toThrow(
      "cookie must be the request's Cookie header",
    );

    // Past its lifetime the bound cookie counts for nothing, even if a client kept sending it.
    vi.setSystemTime(new Date("2026-11-25T10:10:00.001Z"));
    expect(
      await exports.SessionService.authenticate(session.token, {
        cookie: cookies(session.token, session.bound).Cookie,
      }),
    ).toBeNull();
    vi.setSystemTime(new Date("2026-11-25T10:09:59.000Z"));
    const logout = await call("POST", "/auth/logout", cookies(session.token, session.bound));
    expect(logout.status).toBe(200);
    expect(
      await exports.SessionService.authenticate(session.token, {
        cookie: cookies(session.token, session.bound).Cookie,
      }),
    ).toBeNull();
  });

  it("reauthenticate needs the bound cookie too, and keeps the binding", async () => {
    const session = await bindSession();
    expect(await exports.SessionService.reauthenticate({ token: session.token, factors: ["pwd"] })).toBeNull();
    const renewed = await exports.SessionService.reauthenticate({
      token: session.token,
      factors: ["pwd"],
      cookie: cookies(session.token, session.bound).Cookie,
    });
    expect(renewed?.sessionId).toBe(session.id);
    const token = renewed?.token as string;
    expect(await exports.SessionService.authenticate(token)).toBeNull();
    expect(
      await exports.SessionService.authenticate(token, { cookie: cookies(token, session.bound).Cookie }),
    ).not.toBeNull();
  });
});

// The browser that holds the key calls the API itself, by its cookies, as a page's fetch would.
describe("device-bound sessions: the bound browser lists, deletes and reads events by cookie", () => {
  const sameOrigin = { Origin: ORIGIN, "Sec-Fetch-Site": "same-origin" };
  const everything = async () => [await tableSnapshot(), await tableSnapshot("session_events")];

  it("with its live bound cookie: the list, another session deleted, the events, its own session deleted", async () => {
    const session = await bindSession();
    const other = await issue(session.user);
    const byBrowser = { ...cookies(session.token, session.bound), ...sameOrigin };

    const listed = await call("GET", "/auth/sessions", byBrowser);
    expect(listed.status).toBe(200);
    expect(listed.headers.get("Set-Cookie")).toBeNull();
    const seenByOther = (await (await call("GET", "/auth/sessions", bearer(other.token))).json()) as object;
    expect(await listed.json()).toEqual({ ...seenByOther, currentSessionId: session.id });

    await expectMessage(await call("DELETE", `/auth/sessions/${other.id}`, byBrowser), "Session deleted");
    expect(await isLive(other.token)).toBe(false);

    const events = await call("GET", "/auth/events", byBrowser);
    expect(events.status).toBe(200);
    const { events: log } = (await events.json()) as { events: Record<string, unknown>[] };
    expect(log.map(({ type, session_id, actor_session_id }) => ({ type, session_id, actor_session_id }))).toEqual([
      { type: "deleted", session_id: other.id, actor_session_id: session.id },
      { type: "created", session_id: other.id, actor_session_id: null },
      { type: "device_bound", session_id: session.id, actor_session_id: session.id },
      { type: "created", session_id: session.id, actor_session_id: null },
    ]);

    await expectMessage(
      await call("DELETE", `/auth/sessions/${session.id}`, byBrowser),
      "Session deleted",
      CLEARED_COOKIE,
    );
    expect(await row(session.user, session.id)).toBeNull();
  });

  it("a Bearer token, even beside the live bound cookie, is refused: 401 invalid_token, nothing changed", async () => {
    const session = await bindSession();
    const other = await issue(session.user);
    const before = await everything();
    for (const [method, path] of [
      ["GET", "/auth/sessions"],
      ["DELETE", `/auth/sessions/${other.id}`],
      ["GET", "/auth/events"],
    ] as const) {
      for (const headers of [
        bearer(session.token),
        { ...bearer(session.token), ...cookies(session.token, session.bound) },
      ]) {
        await expectError(await call(method, path, headers), 401, "invalid_token", {
          wwwAuthenticate: REJECTED_CHALLENGE,
        });
      }
    }
    expect(await everything()).toEqual(before);
    expect(await isLive(other.token)).toBe(true);
  });

  // Every route that takes a token, with its contract's refusal of a token that proves no live
  // session, sent as Bearer beside the session cookie (the logouts clear a cookie the request
  // carried). `:other` is another live session of the same user, `:own` the caller's.
  const CHALLENGED = { wwwAuthenticate: REJECTED_CHALLENGE };
  const CHALLENGED_CLEARED = { wwwAuthenticate: REJECTED_CHALLENGE, setCookie: CLEARED_COOKIE };
  const TOKEN_ROUTES: [string, string, number, ErrorCode, Parameters<typeof expectError>[3]][] = [
    ["GET", "/auth/sessions", 401, "invalid_token", CHALLENGED],
    ["DELETE", "/auth/sessions/:other", 401, "invalid_token", CHALLENGED],
    ["DELETE", "/auth/sessions/:own", 401, "invalid_token", CHALLENGED],
    ["POST", "/auth/logout", 400, "session_invalid", { setCookie: CLEARED_COOKIE }],
    ["DELETE", "/auth/logout", 401, "session_invalid", CHALLENGED_CLEARED],
    ["DELETE", "/auth/logout?scope=others", 401, "session_invalid", CHALLENGED_CLEARED],
    ["GET", "/auth/events", 401, "invalid_token", CHALLENGED],
    ["GET", "/auth/whoami", 401, "invalid_token", CHALLENGED],
    ["POST", "/auth/token", 401, "invalid_token", CHALLENGED],
  ];

  // Its carrier would take a Bearer token: only the binding refuses it, a bound cookie beside it or not.
  for (const carrier of [null, "both"] as const) {
    it(`bound with carrier ${carrier ?? "omitted"}: its token as Bearer beside its live bound cookie is refused on every route that takes a token, nothing changed`, async () => {
      const session = await bindSession("ES256", undefined, carrier);
      expect(await row(session.user, session.id)).toMatchObject({ carrier });
      const other = await issue(session.user);
      const byScript = { ...bearer(session.token), ...cookies(session.token, session.bound) };
      const before = await everything();
      const tokens = await accessTokenVars();
      for (const [method, path, status, code, headers] of TOKEN_ROUTES) {
        const route = path.replace(":other", other.id).replace(":own", session.id);
        const response = await callWith(tokens, method, route, byScript);
        expect(response.status, `${method} ${path}`).toBe(status);
        await expectError(response, status, code, headers);
      }
      expect(await everything()).toEqual(before);
      expect(await isLive(other.token)).toBe(true);
      // Its own browser still lists both by its cookies.
      const listed = await call("GET", "/auth/sessions", { ...cookies(session.token, session.bound), ...sameOrigin });
      expect(listed.status).toBe(200);
      const { sessions } = (await listed.json()) as { sessions: { id: string }[] };
      expect(sessions.map((s) => s.id).sort()).toEqual([session.id, other.id].sort());
      // And whoami, and the RPC's authenticate, say it is bound.
      const whoami = await call("GET", "/auth/whoami", { ...cookies(session.token, session.bound), ...sameOrigin });
      expect(await whoami.json()).toMatchObject({ session_id: session.id, device_bound: true });
      const { Cookie: cookie } = cookies(session.token, session.bound);
      const authenticated = await exports.SessionService.authenticate(session.token, { cookie });
      expect(authenticated).toMatchObject({ sessionId: session.id, deviceBound: true });
    });
  }

  it("from another site: 403 cross_site_request, nothing changed", async () => {
    const session = await bindSession();
    const other = await issue(session.user);
    const before = await everything();
    for (const [method, path] of [
      ["GET", "/auth/sessions"],
      ["DELETE", `/auth/sessions/${other.id}`],
      ["GET", "/auth/events"],
    ] as const) {
      const fromElsewhere = { ...cookies(session.token, session.bound), Origin: "https://evil.example" };
      await expectError(await call(method, path, fromElsewhere), 403, "cross_site_request");
    }
    expect(await everything()).toEqual(before);
    expect(await isLive(other.token)).toBe(true);
  });

  it("the cookie without a live bound cookie: 401 invalid_token, the cookie kept, nothing changed", async () => {
    const session = await bindSession();
    const other = await issue(session.user);
    const before = await everything();
    for (const [method, path] of [
      ["GET", "/auth/sessions"],
      ["DELETE", `/auth/sessions/${other.id}`],
      ["DELETE", `/auth/sessions/${session.id}`],
      ["GET", "/auth/events"],
    ] as const) {
      for (const bound of [undefined, "x".repeat(43)]) {
        await expectError(
          await call(method, path, { ...cookies(session.token, bound), ...sameOrigin }),
          401,
          "invalid_token",
          {
            wwwAuthenticate: REJECTED_CHALLENGE,
          },
        );
      }
    }
    expect(await everything()).toEqual(before);
    expect(await isLive(other.token)).toBe(true);
  });

  it("each costs one round trip", async () => {
    const session = await bindSession();
    const other = await issue(session.user);
    const byBrowser = { ...cookies(session.token, session.bound), ...sameOrigin };
    for (const [method, path] of [
      ["GET", "/auth/sessions"],
      ["GET", "/auth/events"],
      ["DELETE", `/auth/sessions/${other.id}`],
    ] as const) {
      const counter = countingShards(databases());
      expect((await callWith(counter.env, method, path, byBrowser)).status).toBe(200);
      expect(total(counter.roundTrips())).toBe(1);
    }
  });
});

describe("device-bound sessions: refresh", () => {
  it("403 with a challenge without a proof; a proof over it renews the bound cookie once", async () => {
    const session = await bindSession();
    // The browser had no cached challenge: it asks, and is told what to sign.
    const asked = await refresh(session.token, session.identifier);
    await expectError(asked, 403, "device_proof_required");
    const challenge = challengeIn(asked.headers.get("Secure-Session-Challenge"));
    expect(asked.headers.get("Secure-Session-Challenge")).toBe(`"${challenge}";id="${session.identifier}"`);

    const proof = await signProof(session.key, challenge);
    const renewed = await refresh(session.token, session.identifier, proof);
    expect(renewed.status).toBe(200);
    expect(await renewed.json()).toMatchObject({ session_identifier: session.identifier });
    const bound = boundCookieOf(renewed);
    expect(bound).not.toBe(session.bound);
    // The new cookie proves the session; the replaced one too, until its own expiry (requests
    // already sent with it), but not once a second refresh replaced it again.
    const proves = async (value: string) =>
      (await exports.SessionService.authenticate(session.token, { cookie: cookies(session.token, value).Cookie })) !==
      null;
    expect([await proves(bound), await proves(session.bound)]).toEqual([true, true]);
    const again = await refresh(
      session.token,
      session.identifier,
      await signProof(session.key, challengeIn(renewed.headers.get("Secure-Session-Challenge"))),
    );
    expect([await proves(boundCookieOf(again)), await proves(bound), await proves(session.bound)]).toEqual([
      true,
      true,
      false,
    ]);

    // The same proof again: the challenge is used up.
    const replayed = await refresh(session.token, session.identifier, proof);
    await expectError(replayed, 403, "device_proof_required");
  });

  it("uses the challenge given with the last answer, quoted or not", async () => {
    const session = await bindSession("RS256");
    const first = await refresh(session.token, session.identifier, `"${await signProof(session.key, session.next)}"`);
    expect(first.status).toBe(200);
    const next = challengeIn(first.headers.get("Secure-Session-Challenge"));
    const second = await call("POST", "/auth/dbsc/refresh", {
      ...cookies(session.token),
      "Sec-Secure-Session-Id": session.identifier,
      "Secure-Session-Response": await signProof(session.key, next),
    });
    expect(second.status).toBe(200);
  });

  it("refuses another key: a swapped signer (403), an identifier carrying the thief's key (continue: false)", async () => {
    const session = await bindSession();
    const thief = await deviceKey();
    const before = await row(session.user, session.id);
    const swapped = await refresh(session.token, session.identifier, await signProof(thief, session.next));
    await expectError(swapped, 403, "device_proof_required");
    const challenge = challengeIn(swapped.headers.get("Secure-Session-Challenge"));
    const forgedIdentifier = `${session.id}.${btoa(JSON.stringify(thief.publicJwk)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "")}`;
    const forged = await refresh(session.token, forgedIdentifier, await signProof(thief, challenge));
    expect(await forged.json()).toEqual({ session_identifier: forgedIdentifier, continue: false });
    expect(forged.headers.get("Set-Cookie")).toBe(CLEARED_BOUND);
    const after = await row(session.user, session.id);
    expect({ ...after, dbsc_challenge: null }).toEqual({ ...before, dbsc_challenge: null });
  });

  it("checks a proof against the session's key even when its header carries one (jwk): 403, nothing renewed", async () => {
    const session = await bindSession();
    const thief = await deviceKey();
    const before = await row(session.user, session.id);
    // Over the right challenge, signed by the key in its own header: only the bound key counts.
    const response = await refresh(
      session.token,
      session.identifier,
      await signProof(thief, session.next, { withKey: true }),
    );
    await expectError(response, 403, "device_proof_required");
    const after = await row(session.user, session.id);
    expect({ ...after, dbsc_challenge: null }).toEqual({ ...before, dbsc_challenge: null });
    // The session and its binding go on: its own key renews over the challenge just given.
    const challenge = challengeIn(response.headers.get("Secure-Session-Challenge"));
    expect((await refresh(session.token, session.identifier, await signProof(session.key, challenge))).status).toBe(
      200,
    );
  });

  // The bound key is the identifier's, which names no algorithm: jose alone would verify any RSA
  // algorithm with it, and only the allow-list of ES256 and RS256 refuses these.
  for (const alg of ["PS256", "RS384"] as const) {
    it(`refuses a proof by the bound RSA key under ${alg}: 403 with a new challenge, nothing renewed`, async () => {
      const session = await bindSession("RS256");
      const before = await row(session.user, session.id);
      const response = await refresh(
        session.token,
        session.identifier,
        await signProofAs(session.key, alg, session.next),
      );
      await expectError(response, 403, "device_proof_required");
      const challenge = challengeIn(response.headers.get("Secure-Session-Challenge"));
      expect(response.headers.get("Secure-Session-Challenge")).toBe(`"${challenge}";id="${session.identifier}"`);
      const after = await row(session.user, session.id);
      expect({ ...after, dbsc_challenge: null }).toEqual({ ...before, dbsc_challenge: null });
      // The old bound cookie still proves the session; an RS256 proof over the new challenge renews it.
      const { Cookie: cookie } = cookies(session.token, session.bound);
      expect(await exports.SessionService.authenticate(session.token, { cookie })).not.toBeNull();
      expect((await refresh(session.token, session.identifier, await signProof(session.key, challenge))).status).toBe(
        200,
      );
    });
  }

  it("refuses a proof whose header has a crit, well-formed or not: 403, nothing renewed", async () => {
    const session = await bindSession();
    const before = await row(session.user, session.id);
    // Each over the challenge the last answer gave, so that only the crit is wrong.
    let challenge = session.next;
    for (const [name, header] of Object.entries(CRIT_HEADERS)) {
      const response = await refresh(
        session.token,
        session.identifier,
        await signProof(session.key, challenge, { header }),
      );
      expect(response.status, name).toBe(403);
      await expectError(response, 403, "device_proof_required");
      challenge = challengeIn(response.headers.get("Secure-Session-Challenge"));
    }
    const after = await row(session.user, session.id);
    expect({ ...after, dbsc_challenge: null }).toEqual({ ...before, dbsc_challenge: null });
    expect((await refresh(session.token, session.identifier, await signProof(session.key, challenge))).status).toBe(
      200,
    );
  });

  it("is not activity: last_active_at and a sliding expiry stay as they were", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-25T12:00:00.000Z"));
    const session = await bindSession();
    const before = await row(session.user, session.id);
    vi.setSystemTime(new Date("2026-11-25T12:30:00.000Z"));
    const counter = countingShards(databases());
    const renewed = await callWith({ ...counter.env, SESSION_SLIDING_TTL: "true" }, "POST", "/auth/dbsc/refresh", {
      ...cookies(session.token),
      "Sec-Secure-Session-Id": `"${session.identifier}"`,
      "Secure-Session-Response": await signProof(session.key, session.next),
    });
    expect(renewed.status).toBe(200);
    expect(total(counter.roundTrips())).toBe(1);
    const after = (await row(session.user, session.id)) as Record<string, unknown>;
    expect(after.last_active_at).toBe((before as Record<string, unknown>).last_active_at);
    expect(after.expires_at).toBe((before as Record<string, unknown>).expires_at);
    expect(after.bound_cookie_expires_at).toBe(Date.parse("2026-11-25T12:40:00.000Z"));
  });

  it("an ended session answers continue: false and clears both cookies; an unbound one clears the bound cookie", async () => {
    const session = await bindSession();
    await exports.SessionService.endSession({ sessionId: session.id, reason: "admin" });
    const ended = await refresh(session.token, session.identifier, await signProof(session.key, session.next));
    expect(ended.status).toBe(200);
    expect(await ended.json()).toEqual({ session_identifier: session.identifier, continue: false });
    expect(ended.headers.get("Set-Cookie")).toBe(`${CLEARED_COOKIE}, ${CLEARED_BOUND}`);

    const noCookie = await call("POST", "/auth/dbsc/refresh", { "Sec-Secure-Session-Id": `"${session.identifier}"` });
    expect(await noCookie.json()).toEqual({ session_identifier: session.identifier, continue: false });
    expect(noCookie.headers.get("Set-Cookie")).toBe(CLEARED_BOUND);

    const plain = await issue(newUser());
    const unboundIdentifier = `${plain.id}.${session.identifier.split(".")[1]}`;
    const unbound = await refresh(plain.token, unboundIdentifier);
    expect(await unbound.json()).toEqual({ session_identifier: unboundIdentifier, continue: false });
    expect(unbound.headers.get("Set-Cookie")).toBe(CLEARED_BOUND);
  });

  it("an identifier whose key part is not base64url JSON of a key, as this service writes it, answers continue: false", async () => {
    const session = await bindSession();
    const before = await tableSnapshot();
    const key = session.identifier.split(".")[1] as string;
    const unpadded = (text: string) => btoa(text).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    for (const identifier of [
      session.id,
      `${session.id}.`,
      `${session.id}.%%%`,
      `${session.id}.A`,
      `${session.id}.${key.slice(0, 8)} ${key.slice(8)}`,
      `${session.id}.${key}${"=".repeat((4 - (key.length % 4)) % 4 || 4)}`,
      `${session.id}.${unpadded("not json")}`,
      `${session.id}.${unpadded("null")}`,
      `${session.id}.${unpadded("[]")}`,
      `${session.id}.${unpadded('{"kty":"EC","crv":"P-256"}')}`,
    ]) {
      const response = await refresh(session.token, identifier, await signProof(session.key, session.next));
      expect(await response.json()).toEqual({ session_identifier: identifier, continue: false });
      expect(response.headers.get("Set-Cookie")).toBe(CLEARED_BOUND);
    }
    expect(await tableSnapshot()).toEqual(before);
    expect((await refresh(session.token, session.identifier, await signProof(session.key, session.next))).status).toBe(
      200,
    );
  });

  it("refuses a request without Sec-Secure-Session-Id (no page can send one) and changes nothing", async () => {
    const session = await bindSession();
    const before = await tableSnapshot();
    await expectError(
      await call("POST", "/auth/dbsc/refresh", {
        ...cookies(session.token),
        "Secure-Session-Response": await signProof(session.key, session.next),
      }),
      400,
      "device_proof_invalid",
    );
    expect(await tableSnapshot()).toEqual(before);
  });

  it("registration and every refresh answer are one round trip", async () => {
    const issued = await issueBindable();
    const key = await deviceKey();
    const counter = countingShards(databases());
    const registered = await callWith(counter.env, "POST", "/auth/dbsc/registration", {
      ...cookies(issued.token),
      "Secure-Session-Response": await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true }),
    });
    expect(registered.status).toBe(200);
    expect(total(counter.roundTrips())).toBe(1);
    const { session_identifier: identifier } = (await registered.json()) as { session_identifier: string };
    const asked = await callWith(counter.env, "POST", "/auth/dbsc/refresh", {
      ...cookies(issued.token),
      "Sec-Secure-Session-Id": identifier,
    });
    expect(asked.status).toBe(403);
    expect(total(counter.roundTrips())).toBe(2);
  });
});
