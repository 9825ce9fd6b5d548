import { exports } from "cloudflare:workers";
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { RESERVED_CLAIMS, readAccessTokenIssuer } from "../src/domain/access-token.ts";
import { ConfigError } from "../src/domain/config.ts";
import {
  bearer,
  CHALLENGE,
  CHROME_MAC,
  callWith,
  expectError,
  expectSecurityHeaders,
  FIREFOX_WINDOWS,
  issue,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";
import { ACCESS_TOKEN_AUDIENCE, accessTokenVars, ISSUER, privateJwk } from "./ssf.ts";
import { deadTokens, MALFORMED_AUTHORIZATION } from "./tokens.ts";

// POST /auth/token and GET /.well-known/jwks.json: short-lived access tokens (RFC 9068) minted
// from a live session, verified here as a service would, with jose against the published key set.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const HOME = { country: "DE", asn: 3320 };
const STEP_UP =
  'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';

async function keySet(vars: Partial<Env>): Promise<JSONWebKeySet> {
  const response = await callWith(vars, "GET", "/.well-known/jwks.json");
  expect(response.status).toBe(200);
  expect(response.headers.get("Content-Type")).toBe("application/jwk-set+json");
  expect(response.headers.get("Cache-Control")).toBe("public, max-age=300");
  return (await response.json()) as JSONWebKeySet;
}

async function mint(vars: Partial<Env>, headers: Record<string, string>) {
  const response = await callWith(vars, "POST", "/auth/token", headers);
  expect(response.status).toBe(200);
  expect(response.headers.get("Cache-Control")).toBe("no-store");
  expect(response.headers.get("Set-Cookie")).toBeNull();
  expectSecurityHeaders(response);
  return (await response.json()) as { access_token: string; token_type: string; expires_in: number };
}

/** Verified as a service holding only the key set would: issuer, audience, type, signature, times. */
async function verify(vars: Partial<Env>, token: string) {
  const { payload } = await jwtVerify(token, createLocalJWKSet(await keySet(vars)), {
    issuer: ISSUER,
    audience: ACCESS_TOKEN_AUDIENCE,
    typ: "at+jwt",
    algorithms: ["ES256"],
  });
  return payload;
}

describe("POST /auth/token: an access token for the caller's session", () => {
  it("mints an RFC 9068 token, by Bearer or by cookie, that verifies against the key set", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const now = Date.UTC(2026, 10, 27, 9, 0, 0);
    vi.setSystemTime(now);
    const vars = await accessTokenVars();
    const userId = newUser();
    const session = await exports.SessionService.create({
      userId,
      userAgent: CHROME_MAC,
      factors: [{ factor: "pwd", completedAt: new Date(now - 60_000).toISOString() }, "otp"],
      assuranceLevel: 2,
    });
    for (const credential of [bearer(session.token), sessionCookie(session.token)]) {
      const answer = await mint(vars, credential);
      expect({ ...answer, access_token: "…" }).toEqual({ access_token: "…", token_type: "Bearer", expires_in: 120 });
      expect(decodeProtectedHeader(answer.access_token)).toEqual({ alg: "ES256", kid: "at1", typ: "at+jwt" });
      const iat = now / 1000;
      expect(await verify(vars, answer.access_token)).toEqual({
        iss: ISSUER,
        sub: userId,
        aud: ACCESS_TOKEN_AUDIENCE,
        iat,
        exp: iat + 120,
        jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
        sid: session.id,
        auth_time: iat,
        amr: ["pwd", "otp"],
        acr: "aal2",
      });
    }
  });

  it("auth_time is the latest sign-in or re-authentication, not the minting", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const signIn = Date.UTC(2026, 10, 27, 9, 0, 0);
    vi.setSystemTime(signIn);
    const vars = await accessTokenVars();
    const session = await exports.SessionService.create({ userId: newUser(), factors: ["pwd"] });
    vi.setSystemTime(signIn + 600_000);
    const first = await verify(vars, (await mint(vars, bearer(session.token))).access_token);
    expect({ iat: first.iat, auth_time: first.auth_time }).toEqual({
      iat: signIn / 1000 + 600,
      auth_time: signIn / 1000,
    });
    const reauthenticatedAt = signIn + 900_000;
    vi.setSystemTime(reauthenticatedAt);
    const reissued = await exports.SessionService.reauthenticate({ token: session.token, factors: ["pwd", "otp"] });
    vi.setSystemTime(signIn + 1_200_000);
    const second = await verify(vars, (await mint(vars, bearer(reissued?.token ?? ""))).access_token);
    expect({ iat: second.iat, auth_time: second.auth_time }).toEqual({
      iat: signIn / 1000 + 1200,
      auth_time: reauthenticatedAt / 1000,
    });
  });

  it("support access: act names the agent; no amr or acr when the login flow gave none", async () => {
    const vars = await accessTokenVars();
    const userId = newUser();
    await issue(userId);
    const support = await exports.SessionService.openSupportSession({ userId, agentId: "agent-ada", reason: "T-1" });
    const claims = await verify(vars, (await mint(vars, bearer(support.token))).access_token);
    expect(claims).toMatchObject({ sub: userId, sid: support.id, act: { sub: "agent-ada" } });
    expect(claims).not.toHaveProperty("amr");
    expect(claims).not.toHaveProperty("acr");
  });

  it("carries the session data's keys ACCESS_TOKEN_DATA_CLAIMS allows, as they are now; no others, none by default", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const now = Date.UTC(2026, 10, 27, 9, 0, 0);
    vi.setSystemTime(now);
    const vars = { ...(await accessTokenVars()), ACCESS_TOKEN_DATA_CLAIMS: "tenant, roles,org_id, tenant" };
    const userId = newUser();
    const data = { tenant: "acme", roles: ["admin"], internal: "not for tokens", prefs: { theme: "dark" } };
    const session = await exports.SessionService.create({ userId, data });
    const iat = now / 1000;
    const registered = {
      iss: ISSUER,
      sub: userId,
      aud: ACCESS_TOKEN_AUDIENCE,
      iat,
      exp: iat + 120,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      sid: session.id,
      auth_time: iat,
    };
    const claims = async (env: Partial<Env>) => verify(env, (await mint(env, bearer(session.token))).access_token);
    expect(await claims(vars)).toEqual({ tenant: "acme", roles: ["admin"], ...registered });
    // Without the var, no data in tokens at all.
    expect(await claims(await accessTokenVars())).toEqual(registered);
    // Patched: the next token says what the session says now (a null value is a claim like any other).
    await exports.SessionService.updateSessionData({
      sessionId: session.id,
      data: { tenant: "globex", roles: null, org_id: null },
      mode: "merge",
    });
    expect(await claims(vars)).toEqual({ tenant: "globex", ...registered });
    await exports.SessionService.updateSessionData({ sessionId: session.id, data: { org_id: null } });
    expect(await claims(vars)).toEqual({ org_id: null, ...registered });
  });

  it("every claim the issuer sets is reserved, and ACCESS_TOKEN_DATA_CLAIMS naming any reserved one is refused", async () => {
    const vars = await accessTokenVars();
    const userId = newUser();
    await issue(userId);
    const support = await exports.SessionService.openSupportSession({ userId, agentId: "agent-ada", reason: "T-1" });
    const own = await exports.SessionService.create({ userId, factors: ["pwd"], assuranceLevel: 1 });
    const set = new Set<string>();
    for (const token of [support.token, own.token])
      for (const claim of Object.keys(await verify(vars, (await mint(vars, bearer(token))).access_token)))
        set.add(claim);
    expect([...set].filter((claim) => !(RESERVED_CLAIMS as readonly string[]).includes(claim))).toEqual([]);
    expect(set.size).toBe(11);
    for (const name of RESERVED_CLAIMS)
      expect(() => readAccessTokenIssuer({ ...vars, ACCESS_TOKEN_DATA_CLAIMS: `tenant,${name}` })).toThrow(
        new ConfigError(
          `ACCESS_TOKEN_DATA_CLAIMS may not name a registered claim (${name}): session data never overrides ${RESERVED_CLAIMS.join(", ")}`,
        ),
      );
  });

  it("never outlives its session, and the lifetime follows ACCESS_TOKEN_TTL_SECONDS", async () => {
    const vars = { ...(await accessTokenVars()), ACCESS_TOKEN_TTL_SECONDS: "300" };
    const long = await issue(newUser());
    expect((await mint(vars, bearer(long.token))).expires_in).toBe(300);
    const short = await issue(newUser(), { ttlSeconds: 30 });
    const answer = await mint(vars, bearer(short.token));
    expect(answer.expires_in).toBeLessThanOrEqual(30);
    const claims = await verify(vars, answer.access_token);
    expect(claims.exp).toBe(Math.floor(new Date(short.expiresAt).getTime() / 1000));
  });

  it("several audiences: aud is their array", async () => {
    const vars = { ...(await accessTokenVars()), ACCESS_TOKEN_AUDIENCE: `${ACCESS_TOKEN_AUDIENCE}, billing` };
    const session = await issue(newUser());
    expect(await verify(vars, (await mint(vars, bearer(session.token))).access_token)).toMatchObject({
      aud: [ACCESS_TOKEN_AUDIENCE, "billing"],
    });
  });

  it("a session held gets none: the RFC 9470 challenge", async () => {
    const vars = await accessTokenVars();
    const session = await issue(newUser(), { ...HOME, carrier: "cookie" });
    const from = (userAgent: string) =>
      callWith(
        vars,
        "POST",
        "/auth/token",
        { ...sessionCookie(session.token), "User-Agent": userAgent },
        undefined,
        HOME,
      );
    await expectError(await from(FIREFOX_WINDOWS), 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    await expectError(await from(CHROME_MAC), 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
  });

  it("refused credentials: 401 as every /auth/ read; a cross-site cookie 403; nothing written", async () => {
    const vars = await accessTokenVars();
    const before = await tableSnapshot();
    await expectError(await callWith(vars, "POST", "/auth/token"), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
    for (const authorization of Object.values(MALFORMED_AUTHORIZATION))
      await expectError(
        await callWith(vars, "POST", "/auth/token", { Authorization: authorization }),
        401,
        "invalid_token",
        {
          wwwAuthenticate: REJECTED_CHALLENGE,
        },
      );
    expect(await tableSnapshot()).toEqual(before);
    for (const token of Object.values(await deadTokens()))
      await expectError(await callWith(vars, "POST", "/auth/token", bearer(token)), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
    const browser = await issue(newUser(), { carrier: "cookie" });
    await expectError(await callWith(vars, "POST", "/auth/token", bearer(browser.token)), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    const crossSite = {
      ...sessionCookie(browser.token),
      "Sec-Fetch-Site": "cross-site",
      Origin: "https://evil.example",
    };
    await expectError(await callWith(vars, "POST", "/auth/token", crossSite), 403, "cross_site_request");
    await expectError(await callWith(vars, "GET", "/auth/token", bearer(browser.token)), 405, "method_not_allowed", {
      allow: "POST",
    });
  });
});

describe("the key set and its configuration", () => {
  it("publishes the signing key and a rotated-out key until its exp, never a private member", async () => {
    const now = Math.floor(Date.now() / 1000);
    const keys = [
      await privateJwk("ES256", "new"),
      await privateJwk("ES256", "old", { exp: now + 3600 }),
      await privateJwk("ES256", "gone", { exp: now - 1 }),
    ];
    const vars = await accessTokenVars(keys);
    const published = await keySet(vars);
    expect(published.keys.map((key) => key.kid)).toEqual(["new", "old"]);
    for (const key of published.keys) {
      expect(Object.keys(key).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x", "y"]);
    }
    // A token signed before the rotation (by "old", as the first key then) still verifies.
    const session = await issue(newUser());
    const before = await accessTokenVars([keys[1] && { ...keys[1], exp: undefined }]);
    const token = (await mint(before, bearer(session.token))).access_token;
    expect(decodeProtectedHeader(token).kid).toBe("old");
    expect((await verify(vars, token)).sid).toBe(session.id);
  });

  it("after a rotation the newest key signs: the rotated-out one is only published", async () => {
    const now = Math.floor(Date.now() / 1000);
    const keys = [await privateJwk("ES256", "new"), await privateJwk("ES256", "old", { exp: now + 3600 })];
    const vars = await accessTokenVars(keys);
    const session = await issue(newUser());
    const token = (await mint(vars, bearer(session.token))).access_token;
    expect(decodeProtectedHeader(token)).toEqual({ alg: "ES256", kid: "new", typ: "at+jwt" });
    expect((await verify(vars, token)).sid).toBe(session.id);
  });

  it("off without ACCESS_TOKEN_KEYS: both paths 404, whatever the request carries", async () => {
    const session = await issue(newUser());
    await expectError(await callWith({}, "POST", "/auth/token", bearer(session.token)), 404, "not_found");
    await expectError(await callWith({}, "POST", "/auth/token"), 404, "not_found");
    await expectError(await callWith({}, "GET", "/.well-known/jwks.json"), 404, "not_found", { cacheControl: null });
  });

  it("a configuration that does not parse: 500 with one config_error line naming the var, never a key; whoami unaffected", async () => {
    const session = await issue(newUser());
    const key = JSON.stringify([await privateJwk("ES256", "k")]);
    const refused: [Record<string, string>, string][] = [
      [{ ACCESS_TOKEN_KEYS: "not json" }, "ACCESS_TOKEN_KEYS must be a JSON array"],
      [
        { ACCESS_TOKEN_KEYS: JSON.stringify([{ kty: "EC", kid: "public-only" }]) },
        "ACCESS_TOKEN_KEYS must be a JSON array",
      ],
      [{ ACCESS_TOKEN_ISSUER: "" }, "ACCESS_TOKEN_ISSUER must be an https origin"],
      [{ ACCESS_TOKEN_ISSUER: "https://sessions.example/path" }, "ACCESS_TOKEN_ISSUER must be an origin"],
      [{ ACCESS_TOKEN_AUDIENCE: "" }, "ACCESS_TOKEN_AUDIENCE must list"],
      [{ ACCESS_TOKEN_TTL_SECONDS: "3600" }, "ACCESS_TOKEN_TTL_SECONDS must be an integer from 10 to 600"],
      [
        { ACCESS_TOKEN_DATA_CLAIMS: "tenant, sub, sid" },
        "ACCESS_TOKEN_DATA_CLAIMS may not name a registered claim (sub, sid): session data never overrides iss, sub, aud, exp, nbf, iat, jti, client_id, scope, auth_time, acr, amr, sid, azp, nonce, act, may_act, cnf",
      ],
      [
        { ACCESS_TOKEN_DATA_CLAIMS: "tenant id" },
        "ACCESS_TOKEN_DATA_CLAIMS must list top-level keys of the session data, comma-separated (each 1 to 64 characters, no spaces)",
      ],
    ];
    for (const [override, message] of refused) {
      const vars = { ...(await accessTokenVars()), ...override };
      for (let call = 0; call < 2; call++) {
        const log = vi.spyOn(console, "error").mockImplementation(() => {});
        await expectError(await callWith(vars, "POST", "/auth/token", bearer(session.token)), 500, "internal_error");
        const lines = log.mock.calls.map(([line]) => String(line));
        expect(lines).toHaveLength(1);
        expect(JSON.parse(lines[0] as string)).toMatchObject({ event: "config_error" });
        expect(lines[0]).toContain(message);
        expect(lines[0]).not.toContain(key.slice(20, 40));
        log.mockRestore();
      }
      const whoami = await callWith(vars, "GET", "/auth/whoami", bearer(session.token));
      expect(whoami.status).toBe(200);
      // The published keys need the key set alone: a mistake elsewhere never hides them from verifiers.
      const jwks = await callWith(vars, "GET", "/.well-known/jwks.json");
      expect(jwks.status).toBe(message.startsWith("ACCESS_TOKEN_KEYS") ? 500 : 200);
    }
  });
});
