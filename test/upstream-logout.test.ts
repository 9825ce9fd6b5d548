import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards, faultyBatches, faultyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  call,
  callWith,
  d1,
  d1OfUser,
  databases,
  expectError,
  expectSecurityHeaders,
  FIREFOX_LINUX,
  forgedJws,
  isLive,
  issue,
  newUser,
  sessionCookie,
} from "./helpers.ts";
import { admin, adminKeyVars, newOrganization } from "./organization-fixtures.ts";

// An upstream identity provider ends sessions here in OpenID Connect's words: back-channel
// logout (POST /upstreams/<name>/backchannel-logout) and global token revocation (POST
// /upstreams/<name>/global-token-revocation). Tokens are signed here with `jose`; some are
// written by hand, for what jose would refuse to sign.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const CORP = "https://corp.example/realms/acme";
const OTHER = "https://other.example";
const CLIENT_ID = "sessions-app";
const BCL_EVENT = "http://schemas.openid.net/event/backchannel-logout";

const es256 = await generateKeyPair("ES256", { extractable: true });
const rs256 = await generateKeyPair("RS256", { extractable: true });
const otherKeys = await generateKeyPair("ES256", { extractable: true });
// An attacker's keys, which a token may carry in its own header; and the key corp rotates es1 to.
const attackerKeys = await generateKeyPair("ES256", { extractable: true });
const ATTACKER_JWK = await exportJWK(attackerKeys.publicKey);
const rotatedKeys = await generateKeyPair("ES256", { extractable: true });
/** Header members that would hand the verifier the attacker's key, were it to read them. */
const CARRIED_KEY = {
  jwk: ATTACKER_JWK,
  jku: "https://evil.example/jwks",
  x5u: "https://evil.example/cert.pem",
  x5c: [btoa("the attacker's certificate")],
};
const ES_PUBLIC = { ...(await exportJWK(es256.publicKey)), kid: "es1", alg: "ES256", use: "sig" };
// rs1 is published without alg, as many providers publish their keys: jose alone would verify
// any RSA algorithm with it (PS256, RS384…), signed here with its private key as a JWK without alg.
const RS_PUBLIC = { ...(await exportJWK(rs256.publicKey)), kid: "rs1" };
const CORP_KEYS = [ES_PUBLIC, RS_PUBLIC];
const RS_PRIVATE_JWK = await exportJWK(rs256.privateKey);

type UpstreamConfig = Record<string, unknown>;
const corp = (overrides: UpstreamConfig = {}): UpstreamConfig => ({
  issuer: CORP,
  name: "corp",
  client_id: CLIENT_ID,
  jwks: { keys: CORP_KEYS },
  ...overrides,
});
const other: UpstreamConfig = {
  issuer: OTHER,
  name: "other",
  client_id: CLIENT_ID,
  jwks: { keys: [{ ...(await exportJWK(otherKeys.publicKey)), kid: "o1" }] },
};
// An upstream that sends SETs only: it has no OpenID Connect routes.
const setsOnly: UpstreamConfig = {
  issuer: "https://sets.example",
  name: "sets",
  audience: "https://sessions.example/ssf",
  subject: "iss_sub",
  jwks: { keys: CORP_KEYS },
};
const vars = (...upstreams: UpstreamConfig[]): Partial<Env> => ({
  SSF_UPSTREAMS: JSON.stringify(upstreams.length > 0 ? upstreams : [corp(), other, setsOnly]),
});
const VARS = vars();

const service = (bindings: Partial<Env> = VARS) =>
  new SessionService(createExecutionContext(), { ...env, ...bindings });
const now = () => Math.floor(Date.now() / 1000);

/** A session signed in through `provider` as its `subject` (and `sid`), as a login flow would after its OIDC callback. */
function signIn(userId: string, subject: string, sid: string | null, provider = "corp") {
  return service().create({ userId, userAgent: CHROME_MAC, upstream: { provider, subject, sid } });
}

function logoutClaims(subject: string | undefined, sid: string | undefined, overrides: JWTPayload = {}): JWTPayload {
  return {
    iss: CORP,
    aud: CLIENT_ID,
    iat: now(),
    exp: now() + 120,
    jti: crypto.randomUUID(),
    ...(subject === undefined ? {} : { sub: subject }),
    ...(sid === undefined ? {} : { sid }),
    events: { [BCL_EVENT]: {} },
    ...overrides,
  };
}

interface Signing {
  /** PS256 and RS384: algorithms this service does not take, signed with `key` (a JWK). */
  alg?: "ES256" | "RS256" | "PS256" | "RS384";
  kid?: string;
  typ?: string | null;
  key?: CryptoKey | JWK;
  /** More header members. */
  more?: Record<string, unknown>;
}

function sign(payload: JWTPayload, { alg = "ES256", kid, typ = "logout+jwt", key, more }: Signing = {}) {
  const header = { alg, kid: kid ?? (alg === "ES256" ? "es1" : "rs1"), ...(typ === null ? {} : { typ }), ...more };
  return new SignJWT(payload).setProtectedHeader(header).sign(key ?? (alg === "ES256" ? es256 : rs256).privateKey);
}

/** Signed by hand with what jose would refuse to verify: `alg` none (no `secret`) or an HMAC keyed with `secret`. */
const forged = (claims: JWTPayload, alg: string, secret: Uint8Array | null, typ = "logout+jwt") =>
  forgedJws({ alg, typ, kid: "es1" }, claims, secret);

function logout(token: string, { name = "corp", bindings = VARS, contentType, body }: PostOptions = {}) {
  const headers = { "Content-Type": contentType ?? "application/x-www-form-urlencoded" };
  return callWith(
    bindings,
    "POST",
    `/upstreams/${name}/backchannel-logout`,
    headers,
    body ?? new URLSearchParams({ logout_token: token }).toString(),
  );
}

interface PostOptions {
  name?: string;
  bindings?: Partial<Env>;
  contentType?: string;
  body?: string;
}

async function expectDone(response: Response, status = 200): Promise<void> {
  expect(response.status).toBe(status);
  expect(await response.text()).toBe("");
  expect(response.headers.get("Cache-Control")).toBe("no-store");
  // Back-Channel Logout §2.8.
  expect(response.headers.get("Pragma")).toBe("no-cache");
  expectSecurityHeaders(response);
}

async function expectRefused(response: Response, description: string, error = "invalid_request", status = 400) {
  expect({ status: response.status, body: await response.json() }).toEqual({
    status,
    body: { error, error_description: description },
  });
  expect(response.headers.get("Content-Type")).toBe("application/json");
  expect(response.headers.get("Content-Language")).toBe("en");
  expect(response.headers.get("Cache-Control")).toBe("no-store");
  expect(response.headers.get("Pragma")).toBe("no-cache");
  expect(response.headers.get("WWW-Authenticate")).toBe(status === 401 ? 'Bearer error="invalid_token"' : null);
  expectSecurityHeaders(response);
}

async function liveness(...tokens: string[]): Promise<boolean[]> {
  return Promise.all(tokens.map(isLive));
}

/** The security log's rows for `sessionId`: type and reason. */
async function loggedFor(userId: string, sessionId: string) {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT type, reason, actor_session_id FROM session_events WHERE session_id = ? ORDER BY id")
    .bind(sessionId)
    .all();
  return results;
}

/**
 * corp again, as an organization registers it at runtime (POST /admin/organizations/{id}/providers):
 * the same issuer, client id and keys under a name of its own. The refusals below are run at its
 * URLs as at the var's entry's: each must hold for both.
 */
async function registered(entry: UpstreamConfig): Promise<string> {
  const { ADMIN_KEYS, key } = await adminKeyVars();
  const organization = await newOrganization("Corp's tenant");
  const name = `${entry.name}-${crypto.randomUUID().slice(0, 8)}`;
  const path = `/admin/organizations/${organization}/providers`;
  const answer = await admin({ ...VARS, ADMIN_KEYS } as Partial<Env>, key, "POST", path, { ...entry, name });
  if (answer.status !== 201) throw new Error(`registering a provider answered ${answer.status}`);
  return name;
}
const PROVIDERS = [
  { kind: "an entry of SSF_UPSTREAMS", name: "corp" },
  { kind: "an organization's provider", name: await registered(corp()) },
];
/** Another organization's provider, with an issuer and a key of its own. */
const ELSEWHERE = { ...other, name: "tenant-b", issuer: "https://tenant-b.example" };
await registered(ELSEWHERE);
/** The upstream_call line of a refused token (docs/identity-providers.md, what is logged). */
const REFUSED_LINE = { level: "info", event: "upstream_call", status: 400, error: "invalid_request" };

/** The lines the worker logged of `event`. */
function linesOf(log: { mock: { calls: unknown[][] } }, event: string): unknown[] {
  return log.mock.calls.map(([line]) => JSON.parse(String(line))).filter((line) => line.event === event);
}

async function linkRows(subject: string): Promise<unknown[]> {
  const rows = [];
  for (const binding of Object.keys(databases())) {
    const { results } = await d1(binding)
      .prepare("SELECT upstream, subject, user_id, region FROM upstream_links WHERE subject = ?")
      .bind(subject)
      .all();
    rows.push(...results);
  }
  return rows;
}

describe("a session remembers the upstream sign-in it came from", () => {
  it("create stores the provider, subject and sid, links the subject to the user, and whoami and authenticate show them", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, "sid-1");
    expect(await linkRows(subject)).toEqual([{ upstream: "corp", subject, user_id: user, region: "default" }]);
    const whoami = await callWith(VARS, "GET", "/auth/whoami", bearer(session.token));
    expect(whoami.status).toBe(200);
    expect(((await whoami.json()) as { upstream?: unknown }).upstream).toEqual({
      provider: "corp",
      subject,
      sid: "sid-1",
    });
    expect((await service().authenticate(session.token))?.upstream).toEqual({
      provider: "corp",
      subject,
      sid: "sid-1",
    });
    // No sid: shown as null.
    const noSid = await signIn(user, subject, null);
    expect((await service().authenticate(noSid.token))?.upstream).toEqual({ provider: "corp", subject, sid: null });
  });

  it("a session without one shows none, and the user's own list never shows another system's ids", async () => {
    const user = newUser();
    const plain = await issue(user);
    expect((await exports.SessionService.authenticate(plain.token))?.upstream).toBeUndefined();
    const whoami = await call("GET", "/auth/whoami", bearer(plain.token));
    expect(await whoami.json()).not.toHaveProperty("upstream");
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, "sid-secret");
    const list = await callWith(VARS, "GET", "/auth/sessions", sessionCookie(session.token));
    expect(list.status).toBe(200);
    const text = await list.text();
    expect(text).not.toContain(subject);
    expect(text).not.toContain("sid-secret");
    expect(text).not.toContain("corp");
  });

  it("the admin view (RPC and admin API) shows each session's sign-in; a session without one shows none", async () => {
    const { newAdminKey } = await import("../src/domain/admin-keys.ts");
    const { stored, key } = await newAdminKey("support desk", ["sessions:read"], new Date());
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const [viaCorp, plain] = [await signIn(user, subject, "sid-1"), await issue(user)];
    const listed = await service().listUserSessions(user);
    const response = await callWith(
      { ...VARS, ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>,
      "GET",
      `/admin/users/${user}/sessions`,
      bearer(key),
    );
    expect(response.status).toBe(200);
    const { sessions } = (await response.json()) as { sessions: typeof listed };
    for (const view of [listed, sessions]) {
      expect(view.map((session) => [session.id, session.upstream])).toEqual([
        [plain.id, undefined],
        [viaCorp.id, { provider: "corp", subject, sid: "sid-1" }],
      ]);
    }
  });

  it("a sign-in of the subject as another user moves the link and ends the first user's sessions as that subject; the subject's logout then reaches the second", async () => {
    const [first, second] = [newUser(), newUser()];
    const subject = `sub-${crypto.randomUUID()}`;
    const [asSubject, password] = [await signIn(first, subject, "sid-1"), await issue(first)];
    const other = await signIn(first, `another-${subject}`, "sid-1");
    const seconds = await signIn(second, subject, "sid-2");
    expect(await linkRows(subject)).toEqual([{ upstream: "corp", subject, user_id: second, region: "default" }]);
    expect(await liveness(asSubject.token, password.token, other.token, seconds.token)).toEqual([
      false,
      true,
      true,
      true,
    ]);
    expect((await loggedFor(first, asSubject.id)).at(-1)).toEqual({
      type: "ended",
      reason: "upstream_relinked",
      actor_session_id: null,
    });
    await expectDone(await logout(await sign(logoutClaims(subject, undefined))));
    expect(await liveness(password.token, other.token, seconds.token)).toEqual([true, true, false]);
  });

  it("a relink whose link write's answer was lost: the replay answers the first user, whose sessions as the subject end once, logged with the new sign-in's IP and context", async () => {
    const [first, second] = [newUser(), newUser()];
    const subject = `sub-${crypto.randomUUID()}`;
    const firsts = await service().create({
      userId: first,
      userAgent: CHROME_MAC,
      country: "FR",
      asn: 3215,
      upstream: { provider: "corp", subject, sid: "sid-1" },
    });
    const linkBinding = await bindingOfUser(`corp\n${subject}`);
    // The link's batch commits, then its answer is lost: the retry replays the committed batch.
    const faulty = faultyD1(d1(linkBinding), ["after"]);
    const seconds = await service({ ...VARS, [linkBinding]: faulty.db }).create({
      userId: second,
      ipAddress: "203.0.113.9",
      userAgent: FIREFOX_LINUX,
      country: "DE",
      asn: 3320,
      upstream: { provider: "corp", subject, sid: "sid-2" },
    });
    expect(faulty.roundTrips).toBeGreaterThanOrEqual(2);
    expect(await linkRows(subject)).toEqual([{ upstream: "corp", subject, user_id: second, region: "default" }]);
    expect(await liveness(firsts.token, seconds.token)).toEqual([false, true]);
    const { results } = await (await d1OfUser(first))
      .prepare(
        "SELECT type, reason, actor_session_id, ip_address, context FROM session_events WHERE session_id = ? ORDER BY id",
      )
      .bind(firsts.id)
      .all();
    expect(
      results.map((row) => ({ ...row, context: row.context === null ? null : JSON.parse(String(row.context)) })),
    ).toEqual([
      { type: "created", reason: null, actor_session_id: null, ip_address: null, context: null },
      {
        type: "ended",
        reason: "upstream_relinked",
        actor_session_id: null,
        ip_address: "203.0.113.9",
        context: {
          before: { browser: "Chrome", os: "macOS", country: "FR", asn: 3215 },
          after: { browser: "Firefox", os: "Linux", country: "DE", asn: 3320 },
        },
      },
    ]);
  });

  it("a relink whose sign-in failed before the first user's sessions ended: the link keeps that user, the login flow's retry ends them, once, and the link then forgets that user", async () => {
    const [first, second] = [newUser(), newUser()];
    const subject = `sub-${crypto.randomUUID()}`;
    const firsts = await signIn(first, subject, "sid-1");
    const [linkBinding, firstBinding] = [await bindingOfUser(`corp\n${subject}`), await bindingOfUser(first)];
    const link = async () =>
      d1(linkBinding)
        .prepare("SELECT user_id, previous_user_id FROM upstream_links WHERE upstream = 'corp' AND subject = ?")
        .bind(subject)
        .first();
    // The first user's database fails the batch that ends their sessions as the subject, and its
    // retry: picked by its SQL, not by its place among the round trips, so the fault lands on the
    // ending whether the link shares that database (one database, or by chance) or not, and
    // whatever the sign-in wrote there before.
    const endsAsSubject = (sql: string) => sql.startsWith('delete from "sessions"') && sql.includes("upstream_subject");
    const failing = faultyBatches(d1(firstBinding), endsAsSubject, ["before", "before"]);
    let failure = "none";
    try {
      await service({ ...VARS, [firstBinding]: failing.db }).create({
        userId: second,
        userAgent: CHROME_MAC,
        upstream: { provider: "corp", subject, sid: "sid-2" },
      });
    } catch (error) {
      failure = String(error);
    }
    expect(failure).toBe("DatabaseUnavailable: The session database is unavailable. Retry shortly.");
    expect(failing.roundTrips).toBe(2);
    expect(await isLive(firsts.token)).toBe(true);
    // The link names the second user now, and still keeps the first: what the retry ends.
    expect(await link()).toEqual({ user_id: second, previous_user_id: first });
    const seconds = await signIn(second, subject, "sid-2");
    expect(await liveness(firsts.token, seconds.token)).toEqual([false, true]);
    expect((await loggedFor(first, firsts.id)).filter((row) => row.type === "ended")).toEqual([
      { type: "ended", reason: "upstream_relinked", actor_session_id: null },
    ]);
    expect(await link()).toEqual({ user_id: second, previous_user_id: null });
  });

  const refusals: [string, unknown, string][] = [
    [
      "an upstream not configured",
      { provider: "nobody", subject: "s" },
      "upstream.provider must be the name of an upstream this deployment lists in SSF_UPSTREAMS, or of an enabled provider of an organization",
    ],
    [
      "a subject over 255 characters",
      { provider: "corp", subject: "s".repeat(256) },
      "upstream.subject must be a string of 1 to 255 characters without control characters",
    ],
    [
      "an empty subject",
      { provider: "corp", subject: "" },
      "upstream.subject must be a string of 1 to 255 characters without control characters",
    ],
    [
      "a sid with a control character",
      { provider: "corp", subject: "s", sid: "a\nb" },
      "upstream.sid, when given, must be a string of 1 to 255 characters without control characters",
    ],
    [
      "a sid that is not a string",
      { provider: "corp", subject: "s", sid: 7 },
      "upstream.sid, when given, must be a string of 1 to 255 characters without control characters",
    ],
    [
      "an unknown member",
      { provider: "corp", subject: "s", email: "a@b.example" },
      "upstream must be an object of provider, subject and optionally sid, session_expiry, auth_time, acr and amr",
    ],
    [
      "not an object",
      "corp",
      "upstream must be an object of provider, subject and optionally sid, session_expiry, auth_time, acr and amr",
    ],
  ];

  it.each(refusals)("refused, nothing written: %s (RPC: TypeError)", async (_, upstream, message) => {
    const user = newUser();
    await expect(
      service().create({ userId: user, upstream } as unknown as Parameters<SessionService["create"]>[0]),
    ).rejects.toThrow(new TypeError(message));
    expect(await (await d1OfUser(user)).prepare("SELECT id FROM sessions WHERE user_id = ?").bind(user).all()).toEqual(
      expect.objectContaining({ results: [] }),
    );
    expect(await linkRows("s")).toEqual([]);
  });

  it("refused over the admin API too: 400 invalid_input, nothing written; accepted: 201", async () => {
    const { newAdminKey } = await import("../src/domain/admin-keys.ts");
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const bindings = { ...VARS, ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>;
    const user = newUser();
    const post = (upstream: unknown) =>
      callWith(
        bindings,
        "POST",
        "/admin/sessions",
        { ...bearer(key), "Content-Type": "application/json" },
        JSON.stringify({ userId: user, upstream }),
      );
    const refused = await post({ provider: "nobody", subject: "s" });
    expect({ status: refused.status, body: await refused.json() }).toMatchObject({
      status: 400,
      body: {
        code: "invalid_input",
        detail:
          "upstream.provider must be the name of an upstream this deployment lists in SSF_UPSTREAMS, or of an enabled provider of an organization",
      },
    });
    expect(await (await d1OfUser(user)).prepare("SELECT id FROM sessions WHERE user_id = ?").bind(user).all()).toEqual(
      expect.objectContaining({ results: [] }),
    );
    const subject = `sub-${crypto.randomUUID()}`;
    const created = await post({ provider: "corp", subject, sid: "sid-9" });
    expect(created.status).toBe(201);
    const { token } = (await created.json()) as { token: string };
    expect((await service().authenticate(token))?.upstream).toEqual({ provider: "corp", subject, sid: "sid-9" });
  });
});

describe("back-channel logout", () => {
  it("a sid ends exactly the sessions of that upstream session, logged ended_by_upstream", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const [a1, a2, b, plain, viaOther] = [
      await signIn(user, subject, "sid-A"),
      await signIn(user, subject, "sid-A"),
      await signIn(user, subject, "sid-B"),
      await issue(user),
      await signIn(user, subject, "sid-A", "other"),
    ];
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-A"))));
    expect(await liveness(a1.token, a2.token, b.token, plain.token, viaOther.token)).toEqual([
      false,
      false,
      true,
      true,
      true,
    ]);
    expect(await loggedFor(user, a1.id)).toEqual([
      { type: "created", reason: null, actor_session_id: null },
      { type: "ended_by_upstream", reason: "corp:backchannel_logout", actor_session_id: null },
    ]);
  });

  it("a sub alone ends every session of that upstream subject, and no other", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const sessions = [
      await signIn(user, subject, "sid-A"),
      await signIn(user, subject, null),
      await issue(user),
      await signIn(user, `another-${subject}`, "sid-A"),
    ];
    await expectDone(await logout(await sign(logoutClaims(subject, undefined))));
    expect(await liveness(...sessions.map((session) => session.token))).toEqual([false, false, true, true]);
  });

  it("RS256 and an aud array that contains the client id; typ absent or the untyped JWT older Keycloak sends", async () => {
    for (const signing of [
      { alg: "RS256" as const },
      { typ: null },
      { typ: "JWT" },
      { typ: "application/logout+jwt" },
    ]) {
      const user = newUser();
      const subject = `sub-${crypto.randomUUID()}`;
      const session = await signIn(user, subject, "sid-A");
      const claims = logoutClaims(subject, "sid-A", { aud: ["another-client", CLIENT_ID] });
      await expectDone(await logout(await sign(claims, signing)));
      expect(await isLive(session.token)).toBe(false);
    }
  });

  it("three round trips, the first two at once: its jti's claim and the subject's link, then one batch on the user's database; no request-log warning", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, "sid-A");
    const counter = countingShards(databases());
    const warnings = vi.spyOn(console, "log");
    const claims = logoutClaims(subject, "sid-A");
    const token = await sign(claims);
    await expectDone(await logout(token, { bindings: { ...VARS, ...counter.env } }));
    const expected: Record<string, number> = {};
    for (const key of [`logout\ncorp\n${claims.jti}`, `corp\n${subject}`, user]) {
      const binding = await bindingOfUser(key);
      expected[binding] = (expected[binding] ?? 0) + 1;
    }
    expect(counter.roundTrips()).toEqual(expected);
    expect(warnings.mock.calls.map(([line]) => JSON.parse(String(line)).event)).not.toContain("request");
    expect(await isLive(session.token)).toBe(false);
  });

  it("an nbf passed, or ahead by no more than the skew, is accepted", async () => {
    for (const nbf of [now() - 10, now() + 50]) {
      const subject = `sub-${crypto.randomUUID()}`;
      const session = await signIn(newUser(), subject, "sid-A");
      await expectDone(await logout(await sign(logoutClaims(subject, "sid-A", { nbf }))));
      expect(await isLive(session.token)).toBe(false);
    }
  });

  it("a jti acts once, whichever database: a second token with it, for another subject whose user is on another database, ends nothing", async () => {
    const [first, second] = [newUser(), newUser()];
    // On four databases, a second user on another database than the first's.
    let other = second;
    while (Object.keys(databases()).length > 1 && (await bindingOfUser(other)) === (await bindingOfUser(first)))
      other = newUser();
    const [subject, otherSubject] = [`sub-${crypto.randomUUID()}`, `sub-${crypto.randomUUID()}`];
    const [firsts, others] = [await signIn(first, subject, "sid-A"), await signIn(other, otherSubject, "sid-B")];
    const jti = crypto.randomUUID();
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-A", { jti }))));
    await expectDone(await logout(await sign(logoutClaims(otherSubject, "sid-B", { jti }))));
    expect(await liveness(firsts.token, others.token)).toEqual([false, true]);
    // Sent again for its own subject, the first token still goes on to the user's database, and ends nothing more.
    const since = await signIn(first, subject, "sid-A");
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-A", { jti }))));
    expect(await liveness(since.token, others.token)).toEqual([true, true]);
  });

  it("sessions signed in after the token's iat stay: an old token never ends a newer sign-in", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, "sid-A");
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-A", { iat: now() - 3600 }))));
    expect(await isLive(session.token)).toBe(true);
  });

  it("a subject no sign-in linked: 200, nothing to end", async () => {
    await expectDone(await logout(await sign(logoutClaims(`never-${crypto.randomUUID()}`, "sid-A"))));
  });

  it("a sid of another upstream ends nothing: sessions are matched by upstream, subject and sid", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const ours = await signIn(user, subject, "sid-A");
    const theirs = await signIn(user, subject, "sid-X", "other");
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-X"))));
    expect(await liveness(ours.token, theirs.token)).toEqual([true, true]);
  });

  it("one upstream_call log line per use, with no token or subject in it", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    await signIn(user, subject, "sid-A");
    const lines = vi.spyOn(console, "log");
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-A"))));
    await expectRefused(await logout("nope"), "The logout token is not a compact JWS signed with ES256 or RS256.");
    const logged = lines.mock.calls.map(([line]) => String(line));
    expect(logged.map((line) => JSON.parse(line))).toEqual([
      { level: "info", event: "upstream_call", upstream: "corp", route: "backchannel_logout", status: 200, ended: 1 },
      {
        level: "info",
        event: "upstream_call",
        upstream: "corp",
        route: "backchannel_logout",
        status: 400,
        error: "invalid_request",
      },
    ]);
    expect(logged.join("\n")).not.toContain(subject);
  });

  describe.each(PROVIDERS)("at the URL of $kind", ({ name }) => {
    it("a token acted on once: sent again, it ends nothing, not even a session signed in since", async () => {
      const user = newUser();
      const subject = `sub-${crypto.randomUUID()}`;
      const first = await signIn(user, subject, "sid-A", name);
      // An iat a little ahead (within the skew): the session signed in after it is still one it could speak of.
      const token = await sign(logoutClaims(subject, "sid-A", { iat: now() + 50 }));
      await expectDone(await logout(token, { name }));
      const since = await signIn(user, subject, "sid-A", name);
      await expectDone(await logout(token, { name }));
      expect(await liveness(first.token, since.token)).toEqual([false, true]);
      expect(await loggedFor(user, first.id)).toEqual([
        { type: "created", reason: null, actor_session_id: null },
        { type: "ended_by_upstream", reason: `${name}:backchannel_logout`, actor_session_id: null },
      ]);
    });

    describe("refused with 400 invalid_request, nothing ended", () => {
      const cases: [string, (subject: string) => Promise<string>, string][] = [
        [
          "alg none",
          (subject) => forged(logoutClaims(subject, "sid-A"), "none", null),
          "The logout token is not a compact JWS signed with ES256 or RS256.",
        ],
        [
          "HS256 keyed with the issuer's public key",
          (subject) =>
            forged(logoutClaims(subject, "sid-A"), "HS256", new TextEncoder().encode(JSON.stringify(ES_PUBLIC))),
          "The logout token is not a compact JWS signed with ES256 or RS256.",
        ],
        [
          "a kid that names no key of the issuer",
          async (subject) => sign(logoutClaims(subject, "sid-A"), { kid: "rotated-away" }),
          "The logout token's kid names no key of its issuer.",
        ],
        [
          "a key that cannot verify its algorithm",
          async (subject) => sign(logoutClaims(subject, "sid-A"), { alg: "RS256", kid: "es1" }),
          "The key the logout token names cannot verify RS256 signatures.",
        ],
        // Only the allow-list of ES256 and RS256 refuses these: rs1 has no alg (above).
        ...(["PS256", "RS384"] as const).map((alg): [string, (subject: string) => Promise<string>, string] => [
          `${alg}, signed by the issuer's RSA key (published without alg)`,
          async (subject) => sign(logoutClaims(subject, "sid-A"), { alg, key: RS_PRIVATE_JWK }),
          "The logout token is not a compact JWS signed with ES256 or RS256.",
        ]),
        [
          "signed by another key",
          async (subject) => sign(logoutClaims(subject, "sid-A"), { key: otherKeys.privateKey }),
          "The logout token's signature does not verify with its issuer's key.",
        ],
        [
          "another upstream's token, at this upstream's route",
          async (subject) =>
            sign(logoutClaims(subject, "sid-A", { iss: OTHER }), { kid: "o1", key: otherKeys.privateKey }),
          "The logout token's iss is not the issuer of the upstream this URL is for.",
        ],
        [
          "the token of another organization's provider, at this URL",
          async (subject) =>
            sign(logoutClaims(subject, "sid-A", { iss: ELSEWHERE.issuer }), { kid: "o1", key: otherKeys.privateKey }),
          "The logout token's iss is not the issuer of the upstream this URL is for.",
        ],
        [
          "an iss no upstream has",
          async (subject) => sign(logoutClaims(subject, "sid-A", { iss: "https://evil.example" })),
          "The logout token's iss is not the issuer of the upstream this URL is for.",
        ],
        [
          "an aud without this service's client id",
          async (subject) => sign(logoutClaims(subject, "sid-A", { aud: "another-client" })),
          "The logout token's aud does not contain this service's client id.",
        ],
        [
          "no iat",
          async (subject) => sign(logoutClaims(subject, "sid-A", { iat: undefined })),
          "The logout token has no numeric iat.",
        ],
        [
          "an iat over 24 hours old",
          async (subject) => sign(logoutClaims(subject, "sid-A", { iat: now() - 86_401 })),
          "The logout token has an iat in the future or more than 24 hours old.",
        ],
        [
          "an iat in the future beyond the skew",
          async (subject) => sign(logoutClaims(subject, "sid-A", { iat: now() + 120 })),
          "The logout token has an iat in the future or more than 24 hours old.",
        ],
        [
          "an exp passed",
          async (subject) => sign(logoutClaims(subject, "sid-A", { exp: now() - 61 })),
          "The logout token has expired (exp).",
        ],
        [
          "an nbf in the future beyond the skew",
          async (subject) => sign(logoutClaims(subject, "sid-A", { nbf: now() + 600 })),
          "The logout token is not valid yet (nbf).",
        ],
        [
          "an nbf that is not a number",
          async (subject) => sign(logoutClaims(subject, "sid-A", { nbf: "soon" as unknown as number })),
          "The logout token is not valid yet (nbf).",
        ],
        [
          "no jti",
          async (subject) => sign(logoutClaims(subject, "sid-A", { jti: undefined })),
          "The logout token has no jti of 1 to 256 characters.",
        ],
        [
          "no events",
          async (subject) => sign(logoutClaims(subject, "sid-A", { events: undefined })),
          `The logout token's events has no ${BCL_EVENT} object.`,
        ],
        [
          "events without the back-channel logout event",
          async (subject) =>
            sign(logoutClaims(subject, "sid-A", { events: { "https://schemas.openid.net/secevent/x": {} } })),
          `The logout token's events has no ${BCL_EVENT} object.`,
        ],
        [
          "the event not an object",
          async (subject) => sign(logoutClaims(subject, "sid-A", { events: { [BCL_EVENT]: true } })),
          `The logout token's events has no ${BCL_EVENT} object.`,
        ],
        [
          "a nonce (an ID token passing for a logout token)",
          async (subject) => sign(logoutClaims(subject, "sid-A", { nonce: "n-1" })),
          "The logout token has a nonce.",
        ],
        [
          "neither sub nor sid",
          async () => sign(logoutClaims(undefined, undefined)),
          "The logout token has neither sub nor sid.",
        ],
        [
          "a sid without a sub",
          async () => sign(logoutClaims(undefined, "sid-A")),
          "The logout token has a sid without a sub: this service finds an upstream's sessions by the subject.",
        ],
        [
          "a sub over 255 characters",
          async () => sign(logoutClaims("s".repeat(256), "sid-A")),
          "The logout token's sub is not a subject this service holds.",
        ],
        [
          "a typ of another kind of token",
          async (subject) => sign(logoutClaims(subject, "sid-A"), { typ: "secevent+jwt" }),
          'The logout token\'s typ is neither "logout+jwt" nor "JWT".',
        ],
        [
          "signed by the key its header carries (jwk, jku, x5u, x5c), under the upstream's kid",
          async (subject) => sign(logoutClaims(subject, "sid-A"), { key: attackerKeys.privateKey, more: CARRIED_KEY }),
          "The logout token's signature does not verify with its issuer's key.",
        ],
        [
          "signed by the key its header carries, under a kid the upstream does not have",
          async (subject) =>
            sign(logoutClaims(subject, "sid-A"), {
              key: attackerKeys.privateKey,
              kid: "attacker",
              more: { ...CARRIED_KEY, jwk: { ...ATTACKER_JWK, kid: "attacker" } },
            }),
          "The logout token's kid names no key of its issuer.",
        ],
      ];

      it.each(cases)("%s", async (_, token, description) => {
        const user = newUser();
        const subject = `sub-${crypto.randomUUID()}`;
        const session = await signIn(user, subject, "sid-A", name);
        const log = vi.spyOn(console, "log");
        await expectRefused(await logout(await token(subject), { name }), description);
        expect(linesOf(log, "upstream_call")).toEqual([
          { ...REFUSED_LINE, upstream: name, route: "backchannel_logout" },
        ]);
        expect(await isLive(session.token)).toBe(true);
        expect(await loggedFor(user, session.id)).toEqual([{ type: "created", reason: null, actor_session_id: null }]);
      });

      it("a body that is not one logout_token in a form", async () => {
        const user = newUser();
        const subject = `sub-${crypto.randomUUID()}`;
        const session = await signIn(user, subject, "sid-A", name);
        const token = await sign(logoutClaims(subject, "sid-A"));
        const form = new URLSearchParams({ logout_token: token }).toString();
        await expectRefused(
          await logout(token, { name, body: "state=1" }),
          "The body has not exactly one logout_token.",
        );
        await expectRefused(
          await logout(token, { name, body: `${form}&${form}` }),
          "The body has not exactly one logout_token.",
        );
        await expectRefused(
          await logout(token, { name, body: `logout_token=${"a".repeat(16_385)}` }),
          "The body is longer than 16384 bytes.",
        );
        for (const contentType of ["application/json", "text/plain", "application/jwt"])
          await expectRefused(
            await logout(token, { name, contentType, body: form }),
            "The Content-Type is not application/x-www-form-urlencoded.",
          );
        const noType = await callWith(VARS, "POST", `/upstreams/${name}/backchannel-logout`, {}, form);
        await expectRefused(noType, "The Content-Type is not application/x-www-form-urlencoded.");
        expect(await isLive(session.token)).toBe(true);
      });
    });
  });

  it("no such route: an unknown upstream, one without client_id, or none configured: 404; another method: 405", async () => {
    const token = await sign(logoutClaims("s", "sid-A"));
    for (const name of ["nobody", "sets"]) await expectError(await logout(token, { name }), 404, "not_found");
    await expectError(
      await call("POST", "/upstreams/corp/backchannel-logout", {
        "Content-Type": "application/x-www-form-urlencoded",
      }),
      404,
      "not_found",
    );
    await expectError(await callWith(VARS, "GET", "/upstreams/corp/backchannel-logout"), 405, "method_not_allowed", {
      allow: "POST",
    });
  });

  it("keys from jwks_uri: an unknown kid refused after one refetch, then accepted once the upstream publishes it; unreachable: 503", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const jwksUri = `https://corp.example/certs/${crypto.randomUUID()}`;
    let served: unknown[] = [ES_PUBLIC];
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ keys: served }));
    const bindings = vars(corp({ jwks: undefined, jwks_uri: jwksUri }));
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await service(bindings).create({ userId: user, upstream: { provider: "corp", subject } });
    const rotated = () => sign(logoutClaims(subject, undefined), { alg: "RS256" });
    await expectRefused(
      await logout(await rotated(), { bindings }),
      "The logout token's kid names no key of its issuer.",
    );
    expect(fetches).toHaveBeenCalledTimes(1);
    vi.setSystemTime(Date.now() + 61_000);
    await expectRefused(
      await logout(await rotated(), { bindings }),
      "The logout token's kid names no key of its issuer.",
    );
    expect(fetches).toHaveBeenCalledTimes(2);
    served = CORP_KEYS;
    vi.setSystemTime(Date.now() + 61_000);
    await expectDone(await logout(await rotated(), { bindings }));
    expect(fetches).toHaveBeenCalledTimes(3);
    expect(await isLive(session.token)).toBe(false);

    vi.spyOn(console, "warn").mockImplementation(() => {});
    fetches.mockResolvedValue(new Response("down", { status: 502 }));
    const down = vars(corp({ jwks: undefined, jwks_uri: `https://corp.example/certs/${crypto.randomUUID()}` }));
    const second = await service(down).create({ userId: user, upstream: { provider: "corp", subject } });
    await expectError(
      await logout(await sign(logoutClaims(subject, undefined)), { bindings: down }),
      503,
      "service_unavailable",
      {
        retryAfter: "10",
      },
    );
    expect(await isLive(second.token)).toBe(true);
  });

  it("a fault while verifying that is not the token's (a key import that throws) is a 500 with its log line, never a refusal", async () => {
    // Its own entry: a key set this isolate has not imported a key of yet.
    const bindings = vars(corp({ jwks: { keys: [ES_PUBLIC] } }));
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await service(bindings).create({ userId: newUser(), upstream: { provider: "corp", subject } });
    const lines = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(crypto.subtle, "importKey").mockRejectedValue(new Error("planted"));
    await expectError(await logout(await sign(logoutClaims(subject, undefined)), { bindings }), 500, "internal_error");
    expect(lines.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual(
      expect.objectContaining({
        event: "unhandled_error",
        name: "Error",
        route: "/upstreams/:name/backchannel-logout",
      }),
    );
    expect(await isLive(session.token)).toBe(true);
  });

  it("keys from jwks_uri are the set's only: a header's jku or x5u is never fetched, its jwk never used", async () => {
    const jwksUri = `https://corp.example/certs/${crypto.randomUUID()}`;
    const fetched: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
      fetched.push(String(input instanceof Request ? input.url : input));
      return Response.json({ keys: CORP_KEYS });
    });
    const bindings = vars(corp({ jwks: undefined, jwks_uri: jwksUri }));
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await service(bindings).create({ userId: newUser(), upstream: { provider: "corp", subject } });
    const carried = (kid: string) =>
      sign(logoutClaims(subject, undefined), { key: attackerKeys.privateKey, kid, more: CARRIED_KEY });
    await expectRefused(
      await logout(await carried("attacker"), { bindings }),
      "The logout token's kid names no key of its issuer.",
    );
    await expectRefused(
      await logout(await carried("es1"), { bindings }),
      "The logout token's signature does not verify with its issuer's key.",
    );
    expect(fetched).toEqual([jwksUri]);
    expect(await isLive(session.token)).toBe(true);
  });

  it("a fetched key set is kept 5 minutes and no longer: a key the upstream replaced stops verifying once its set is that old", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const jwksUri = `https://corp.example/certs/${crypto.randomUUID()}`;
    let served: unknown[] = [ES_PUBLIC];
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ keys: served }));
    const bindings = vars(corp({ jwks: undefined, jwks_uri: jwksUri }));
    const subject = `sub-${crypto.randomUUID()}`;
    const withOldKey = () => sign(logoutClaims(subject, undefined));
    await expectDone(await logout(await withOldKey(), { bindings }));
    expect(fetches).toHaveBeenCalledTimes(1);
    // The upstream replaces the key es1 names (a compromise, say), under the same kid.
    served = [{ ...(await exportJWK(rotatedKeys.publicKey)), kid: "es1", alg: "ES256", use: "sig" }];
    vi.setSystemTime(Date.now() + 4 * 60_000);
    await expectDone(await logout(await withOldKey(), { bindings }));
    expect(fetches).toHaveBeenCalledTimes(1);
    vi.setSystemTime(Date.now() + 61_000);
    await expectRefused(
      await logout(await withOldKey(), { bindings }),
      "The logout token's signature does not verify with its issuer's key.",
    );
    expect(fetches).toHaveBeenCalledTimes(2);
    await expectDone(
      await logout(await sign(logoutClaims(subject, undefined), { key: rotatedKeys.privateKey }), { bindings }),
    );
    expect(fetches).toHaveBeenCalledTimes(2);
  });

  it("a key the upstream published after the last fetch, within the minute: 503 with the seconds until a refetch may be, then the same logout is acted on", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const warnings = vi.spyOn(console, "warn").mockImplementation(() => {});
    const jwksUri = `https://corp.example/certs/${crypto.randomUUID()}`;
    let served: unknown[] = [ES_PUBLIC];
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ keys: served }));
    const bindings = vars(corp({ jwks: undefined, jwks_uri: jwksUri }));
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    await expectDone(await logout(await sign(logoutClaims(`sub-${crypto.randomUUID()}`, undefined)), { bindings }));
    const session = await service(bindings).create({ userId: user, upstream: { provider: "corp", subject } });
    // 20 s after the fetch, the upstream publishes rs1 and signs its next logout with it.
    vi.setSystemTime(Date.now() + 20_000);
    served = CORP_KEYS;
    const token = await sign(logoutClaims(subject, undefined), { alg: "RS256" });
    await expectError(await logout(token, { bindings }), 503, "service_unavailable", { retryAfter: "40" });
    vi.setSystemTime(Date.now() + 39_500);
    await expectError(await logout(token, { bindings }), 503, "service_unavailable", { retryAfter: "1" });
    expect(await isLive(session.token)).toBe(true);
    expect(fetches).toHaveBeenCalledTimes(1);
    expect(warnings.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual({
      level: "warn",
      event: "upstream_keys_unavailable",
      upstream: "corp",
      why: "unknown_kid",
      method: "POST",
      route: "/upstreams/:name/backchannel-logout",
      request_id: expect.any(String),
    });
    vi.setSystemTime(Date.now() + 500);
    await expectDone(await logout(token, { bindings }));
    expect(fetches).toHaveBeenCalledTimes(2);
    expect(await isLive(session.token)).toBe(false);
  });

  it("the same for a global token revocation: 503 within the minute after the fetch, then acted on", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const jwksUri = `https://corp.example/certs/${crypto.randomUUID()}`;
    let served: unknown[] = [ES_PUBLIC];
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ keys: served }));
    const bindings = vars(corp({ jwks: undefined, jwks_uri: jwksUri }));
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await service(bindings).create({ userId: newUser(), upstream: { provider: "corp", subject } });
    const path = "/upstreams/corp/global-token-revocation";
    const revoke = (jwt: string) =>
      callWith(
        bindings,
        "POST",
        path,
        { Authorization: `Bearer ${jwt}`, "Content-Type": "application/json" },
        JSON.stringify({ sub_id: { format: "iss_sub", iss: CORP, sub: subject } }),
      );
    const jwt = (signing: Signing) =>
      sign(
        { iss: CORP, aud: `https://sessions.example${path}`, iat: now(), exp: now() + 300, jti: crypto.randomUUID() },
        { typ: "JWT", ...signing },
      );
    // The set fetched (a logout of a subject no sign-in linked), then rs1 published 1 s later.
    await expectDone(await logout(await sign(logoutClaims(`sub-${crypto.randomUUID()}`, undefined)), { bindings }));
    vi.setSystemTime(Date.now() + 1_000);
    served = CORP_KEYS;
    const token = await jwt({ alg: "RS256" });
    await expectError(await revoke(token), 503, "service_unavailable", { retryAfter: "59" });
    expect(await isLive(session.token)).toBe(true);
    vi.setSystemTime(Date.now() + 59_000);
    await expectDone(await revoke(token), 204);
    expect(fetches).toHaveBeenCalledTimes(2);
    expect(await isLive(session.token)).toBe(false);
  });

  it("forged kids refetch the upstream's key set once a minute at most (503 until the minute ends, 400 once fetched), and its real logouts are still answered", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const jwksUri = `https://corp.example/certs/${crypto.randomUUID()}`;
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ keys: CORP_KEYS }));
    const bindings = vars(corp({ jwks: undefined, jwks_uri: jwksUri }));
    const subject = `sub-${crypto.randomUUID()}`;
    const forgedLogout = async (kid: string) =>
      logout(await sign(logoutClaims(subject, undefined), { kid }), { bindings });
    const refused = async (kid: string) =>
      expectRefused(await forgedLogout(kid), "The logout token's kid names no key of its issuer.");
    const held = async (kid: string, retryAfter: string) =>
      expectError(await forgedLogout(kid), 503, "service_unavailable", { retryAfter });
    await expectDone(await logout(await sign(logoutClaims(subject, undefined)), { bindings }));
    await held("forged-1", "60");
    await held("forged-2", "60");
    // Within the minute after the set was fetched, no forged kid fetches it again.
    expect(fetches).toHaveBeenCalledTimes(1);
    vi.setSystemTime(Date.now() + 61_000);
    await refused("forged-3");
    vi.setSystemTime(Date.now() + 30_000);
    await held("forged-4", "30");
    await held("forged-5", "30");
    // The first forged kid after the minute fetched it once; the others, within the minute after, did not.
    expect(fetches).toHaveBeenCalledTimes(2);
    await expectDone(await logout(await sign(logoutClaims(subject, undefined)), { bindings }));
    expect(fetches).toHaveBeenCalledTimes(2);
  });
});

describe("back-channel logout, as docs/identity-providers.md says it", () => {
  it("typ: logout+jwt or JWT, with or without application/, in any case, or none; any other refused", async () => {
    for (const typ of ["logout+jwt", "application/logout+jwt", "Logout+JWT", "JWT", "jwt", "application/jwt", null]) {
      const subject = `sub-${crypto.randomUUID()}`;
      const session = await signIn(newUser(), subject, "sid-A");
      await expectDone(await logout(await sign(logoutClaims(subject, "sid-A"), { typ })));
      expect(await isLive(session.token)).toBe(false);
    }
    for (const typ of ["secevent+jwt", "at+jwt", "application/at+jwt", "logout"])
      await expectRefused(
        await logout(await sign(logoutClaims("s", "sid-A"), { typ })),
        'The logout token\'s typ is neither "logout+jwt" nor "JWT".',
      );
  });

  it("no kid: the key of a key set of one; with more keys, refused as an unknown kid", async () => {
    const subject = `sub-${crypto.randomUUID()}`;
    const oneKey = vars(corp({ jwks: { keys: [ES_PUBLIC] } }));
    const session = await service(oneKey).create({ userId: newUser(), upstream: { provider: "corp", subject } });
    const token = await sign(logoutClaims(subject, undefined), { more: { kid: undefined } });
    expect(JSON.parse(atob((token.split(".")[0] as string).replace(/-/g, "+").replace(/_/g, "/")))).toEqual({
      alg: "ES256",
      typ: "logout+jwt",
    });
    await expectRefused(await logout(token), "The logout token's kid names no key of its issuer.");
    expect(await isLive(session.token)).toBe(true);
    await expectDone(await logout(token, { bindings: oneKey }));
    expect(await isLive(session.token)).toBe(false);
  });

  it("the 60 s of skew hold for exp too: 59 s past is accepted, 61 s refused", async () => {
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(newUser(), subject, "sid-A");
    await expectRefused(
      await logout(await sign(logoutClaims(subject, "sid-A", { exp: now() - 61 }))),
      "The logout token has expired (exp).",
    );
    expect(await isLive(session.token)).toBe(true);
    await expectDone(await logout(await sign(logoutClaims(subject, "sid-A", { exp: now() - 59 }))));
    expect(await isLive(session.token)).toBe(false);
  });

  it("Pragma: no-cache (§2.8) on every answer of the route, a 404 and a 503 included; not on a 405, answered before it", async () => {
    const token = await sign(logoutClaims("s", "sid-A"));
    const unknown = await logout(token, { name: "nobody" });
    expect([unknown.status, unknown.headers.get("Pragma")]).toEqual([404, "no-cache"]);
    vi.spyOn(console, "warn").mockImplementation(() => {});
    vi.spyOn(globalThis, "fetch").mockResolvedValue(new Response("down", { status: 502 }));
    const down = vars(corp({ jwks: undefined, jwks_uri: `https://corp.example/certs/${crypto.randomUUID()}` }));
    const unavailable = await logout(token, { bindings: down });
    expect([unavailable.status, unavailable.headers.get("Pragma")]).toEqual([503, "no-cache"]);
    const other = await callWith(VARS, "GET", "/upstreams/corp/backchannel-logout");
    expect([other.status, other.headers.get("Pragma")]).toEqual([405, null]);
  });

  it("a refused SSF_UPSTREAMS: 500 on the providers' routes, /ssf/inbound and a sign-in naming a provider; every other request is served", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const broken: Partial<Env> = { SSF_UPSTREAMS: "not json" };
    const session = await service(broken).create({ userId: newUser(), userAgent: CHROME_MAC });
    const whoami = await callWith(broken, "GET", "/auth/whoami", bearer(session.token));
    expect(whoami.status).toBe(200);
    expect(errors).not.toHaveBeenCalled();
    const refusedLogout = await logout(await sign(logoutClaims("s", "sid-A")), { bindings: broken });
    expect(refusedLogout.headers.get("Pragma")).toBe("no-cache");
    await expectError(refusedLogout, 500, "internal_error");
    const revocation = await callWith(
      broken,
      "POST",
      "/upstreams/corp/global-token-revocation",
      { Authorization: "Bearer x", "Content-Type": "application/json" },
      "{}",
    );
    await expectError(revocation, 500, "internal_error");
    await expectError(
      await callWith(broken, "POST", "/ssf/inbound", { "Content-Type": "application/secevent+jwt" }, "x"),
      500,
      "internal_error",
      { cacheControl: null },
    );
    await expect(
      service(broken).create({ userId: newUser(), upstream: { provider: "corp", subject: "s" } }),
    ).rejects.toThrow(/^SSF_UPSTREAMS must be a JSON array of upstreams/);
    // One line each, the same over HTTP and RPC but for where.
    const line = (site: Record<string, string>) => ({
      level: "error",
      event: "config_error",
      message: expect.stringMatching(/^SSF_UPSTREAMS must be a JSON array of upstreams/),
      ...site,
      request_id: expect.any(String),
    });
    expect(errors.mock.calls.map(([logged]) => JSON.parse(String(logged)))).toEqual([
      line({ method: "POST", route: "/upstreams/:name/backchannel-logout" }),
      line({ method: "POST", route: "/upstreams/:name/global-token-revocation" }),
      line({ method: "POST", route: "/ssf/inbound" }),
      line({ rpc: "create" }),
    ]);
  });
});

describe("the providers of docs/identity-providers.md's settings, each an organization's", () => {
  // What the settings table says each sends (RS256, `sub` and `sid`) under its issuer's shape;
  // typ as OpenID Connect §2.4 types it, Keycloak's before 25 `JWT`. Microsoft Entra ID is not
  // here: it sends no back-channel logout token (the same page).
  const shapes = [
    { provider: "Okta", issuer: "https://acme.okta.com", typ: "logout+jwt" },
    { provider: "Auth0", issuer: "https://acme.us.auth0.com/", typ: "logout+jwt" },
    { provider: "Keycloak before 25", issuer: "https://sso.acme.example/realms/acme", typ: "JWT" },
  ];

  it.each(shapes)("$provider: its logout token ends the session of its sid, logged", async ({ issuer, typ }) => {
    const name = await registered({ name: "idp", issuer, client_id: CLIENT_ID, jwks: { keys: [RS_PUBLIC] } });
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const [ended, kept] = [await signIn(user, subject, "sid-A", name), await signIn(user, subject, "sid-B", name)];
    const log = vi.spyOn(console, "log");
    const token = await sign(logoutClaims(subject, "sid-A", { iss: issuer, exp: undefined }), { alg: "RS256", typ });
    await expectDone(await logout(token, { name }));
    expect(linesOf(log, "upstream_call")).toEqual([
      { level: "info", event: "upstream_call", upstream: name, route: "backchannel_logout", status: 200, ended: 1 },
    ]);
    expect(await liveness(ended.token, kept.token)).toEqual([false, true]);
    expect((await loggedFor(user, ended.id)).at(-1)).toEqual({
      type: "ended_by_upstream",
      reason: `${name}:backchannel_logout`,
      actor_session_id: null,
    });
  });

  it("Okta's Universal Logout: its signed JWT ends every session of the user, 204, logged", async () => {
    const issuer = "https://acme.okta.com";
    const name = await registered({ name: "okta", issuer, client_id: CLIENT_ID, jwks: { keys: [RS_PUBLIC] } });
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const sessions = [await signIn(user, subject, "sid-A", name), await signIn(user, subject, "sid-B", name)];
    const path = `/upstreams/${name}/global-token-revocation`;
    const claims = { iss: issuer, aud: `https://sessions.example${path}`, iat: now(), exp: now() + 300 };
    const jwt = await sign({ ...claims, jti: crypto.randomUUID() }, { alg: "RS256", typ: "JWT" });
    const log = vi.spyOn(console, "log");
    const answer = await callWith(
      VARS,
      "POST",
      path,
      { Authorization: `Bearer ${jwt}`, "Content-Type": "application/json" },
      JSON.stringify({ sub_id: { format: "iss_sub", iss: issuer, sub: subject } }),
    );
    await expectDone(answer, 204);
    expect(linesOf(log, "upstream_call")).toEqual([
      { level: "info", event: "upstream_call", upstream: name, route: "global_revocation", status: 204, ended: 2 },
    ]);
    expect(await liveness(...sessions.map((session) => session.token))).toEqual([false, false]);
  });
});

describe("global token revocation", () => {
  const pathOf = (name: string) => `/upstreams/${name}/global-token-revocation`;
  const urlOf = (name: string) => `https://sessions.example${pathOf(name)}`;
  const PATH = pathOf("corp");
  const URL = urlOf("corp");

  const claimsFor = (aud: string): JWTPayload => ({
    iss: CORP,
    aud,
    iat: now(),
    exp: now() + 300,
    jti: crypto.randomUUID(),
  });

  function jwt(overrides: JWTPayload = {}, signing: Signing = {}, aud = URL) {
    return sign(
      { ...claimsFor(aud), ...overrides },
      {
        typ: "JWT",
        ...signing,
      },
    );
  }

  function revoke(
    subject: string,
    authorization: string | null,
    { body, contentType, bindings = VARS, name = "corp" }: PostOptions = {},
  ) {
    const headers: Record<string, string> = { "Content-Type": contentType ?? "application/json" };
    if (authorization !== null) headers.Authorization = authorization;
    const sent = body ?? JSON.stringify({ sub_id: { format: "iss_sub", iss: CORP, sub: subject } });
    return callWith(bindings, "POST", pathOf(name), headers, sent);
  }

  it("ends every session of the user its subject is linked to, whatever signed them in: 204, logged", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const sessions = [await signIn(user, subject, "sid-A"), await issue(user), await signIn(user, "x", "y", "other")];
    const bystander = await issue(newUser());
    await expectDone(await revoke(subject, `Bearer ${await jwt()}`), 204);
    expect(await liveness(...sessions.map((session) => session.token), bystander.token)).toEqual([
      false,
      false,
      false,
      true,
    ]);
    expect((await loggedFor(user, (sessions[1] as { id: string }).id)).at(-1)).toEqual({
      type: "ended_by_upstream",
      reason: "corp:global_revocation",
      actor_session_id: null,
    });
  });

  it("three round trips, the first two at once: its JWT's claim and the subject's link, then one batch on the user's database", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, "sid-A");
    const counter = countingShards(databases());
    await expectDone(await revoke(subject, `Bearer ${await jwt()}`, { bindings: { ...VARS, ...counter.env } }), 204);
    const trips = Object.values(counter.roundTrips()).reduce((sum, count) => sum + count, 0);
    expect(trips).toBe(3);
    expect(counter.roundTrips()[await bindingOfUser(user)]).toBeGreaterThanOrEqual(1);
    expect(await isLive(session.token)).toBe(false);
  });

  it("its JWT's nbf passed, or ahead by no more than the skew, is accepted", async () => {
    for (const nbf of [now() - 10, now() + 50]) {
      const subject = `sub-${crypto.randomUUID()}`;
      const session = await signIn(newUser(), subject, null);
      await expectDone(await revoke(subject, `Bearer ${await jwt({ nbf })}`), 204);
      expect(await isLive(session.token)).toBe(false);
    }
  });

  it("its JWT's aud may be an array that contains this URL, and its typ absent", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, null);
    await expectDone(await revoke(subject, `Bearer ${await jwt({ aud: ["other", URL] }, { typ: null })}`), 204);
    expect(await isLive(session.token)).toBe(false);
  });

  it("a subject no sign-in linked: 404 user_not_found", async () => {
    await expectRefused(
      await revoke(`never-${crypto.randomUUID()}`, `Bearer ${await jwt()}`),
      "No sign-in linked this subject to a user.",
      "user_not_found",
      404,
    );
  });

  const unauthenticated: [string, (aud: string) => Promise<string | null>, string][] = [
    ["no Authorization", async () => null, "The request has no Authorization: Bearer JWT."],
    ["Basic credentials", async () => "Basic Y29ycDpzZWNyZXQ=", "The request has no Authorization: Bearer JWT."],
    ["Bearer without a token", async () => "Bearer ", "The request has no Authorization: Bearer JWT."],
    ["not a JWT", async () => "Bearer opaque-token", "The JWT is not a compact JWS signed with ES256 or RS256."],
    [
      "alg none",
      async (aud) => `Bearer ${await forged(claimsFor(aud), "none", null, "JWT")}`,
      "The JWT is not a compact JWS signed with ES256 or RS256.",
    ],
    [
      "HS256 keyed with the issuer's public key",
      async (aud) =>
        `Bearer ${await forged(claimsFor(aud), "HS256", new TextEncoder().encode(JSON.stringify(ES_PUBLIC)), "JWT")}`,
      "The JWT is not a compact JWS signed with ES256 or RS256.",
    ],
    [
      "the JWT of another organization's provider, at this URL",
      async (aud) => `Bearer ${await jwt({ iss: ELSEWHERE.issuer }, { kid: "o1", key: otherKeys.privateKey }, aud)}`,
      "The JWT's iss is not the issuer of the upstream this URL is for.",
    ],
    [
      "an iat in the future beyond the skew",
      async (aud) => `Bearer ${await jwt({ iat: now() + 120 }, {}, aud)}`,
      "The JWT has an iat in the future or more than 24 hours old.",
    ],
    // Only the allow-list of ES256 and RS256 refuses these: rs1 has no alg (above).
    ...(["PS256", "RS384"] as const).map((alg): [string, (aud: string) => Promise<string>, string] => [
      `${alg}, signed by the issuer's RSA key (published without alg)`,
      async (aud) => `Bearer ${await jwt({}, { alg, key: RS_PRIVATE_JWK }, aud)}`,
      "The JWT is not a compact JWS signed with ES256 or RS256.",
    ]),
    [
      "signed by another key",
      async (aud) => `Bearer ${await jwt({}, { key: otherKeys.privateKey }, aud)}`,
      "The JWT's signature does not verify with its issuer's key.",
    ],
    [
      "another upstream's JWT",
      async (aud) => `Bearer ${await jwt({ iss: OTHER }, { kid: "o1", key: otherKeys.privateKey }, aud)}`,
      "The JWT's iss is not the issuer of the upstream this URL is for.",
    ],
    [
      "an aud of another URL",
      async (aud) => `Bearer ${await jwt({ aud: "https://sessions.example/elsewhere" }, {}, aud)}`,
      "The JWT's aud is not this URL.",
    ],
    [
      "one of the upstream's ID tokens (aud the client id), as a signed-in user holds it",
      async (aud) => `Bearer ${await jwt({ aud: CLIENT_ID, nonce: "n-1", sub: "attacker" }, {}, aud)}`,
      "The JWT's aud is not this URL.",
    ],
    [
      "a token of another kind with this URL as aud: a nonce",
      async (aud) => `Bearer ${await jwt({ nonce: "n-1" }, {}, aud)}`,
      "The JWT is a token of another kind (typ, nonce or events).",
    ],
    [
      "a token of another kind with this URL as aud: a logout token's events",
      async (aud) => `Bearer ${await jwt({ events: { [BCL_EVENT]: {} } }, {}, aud)}`,
      "The JWT is a token of another kind (typ, nonce or events).",
    ],
    [
      "a token of another kind with this URL as aud: typ at+jwt",
      async (aud) => `Bearer ${await jwt({}, { typ: "at+jwt" }, aud)}`,
      "The JWT is a token of another kind (typ, nonce or events).",
    ],
    [
      "an iat over 24 hours old",
      async (aud) => `Bearer ${await jwt({ iat: now() - 86_401 }, {}, aud)}`,
      "The JWT has an iat in the future or more than 24 hours old.",
    ],
    ["no exp", async (aud) => `Bearer ${await jwt({ exp: undefined }, {}, aud)}`, "The JWT has no exp."],
    ["an exp passed", async (aud) => `Bearer ${await jwt({ exp: now() - 61 }, {}, aud)}`, "The JWT has expired (exp)."],
    [
      "an nbf ten minutes ahead",
      async (aud) => `Bearer ${await jwt({ nbf: now() + 600 }, {}, aud)}`,
      "The JWT is not valid yet (nbf).",
    ],
    [
      "no jti",
      async (aud) => `Bearer ${await jwt({ jti: undefined }, {}, aud)}`,
      "The JWT has no jti of 1 to 256 characters.",
    ],
    [
      "signed by the key its header carries (jwk, jku, x5u, x5c), under the upstream's kid",
      async (aud) => `Bearer ${await jwt({}, { key: attackerKeys.privateKey, more: CARRIED_KEY }, aud)}`,
      "The JWT's signature does not verify with its issuer's key.",
    ],
    [
      "signed by the key its header carries, under a kid the upstream does not have",
      async (aud) =>
        `Bearer ${await jwt({}, { key: attackerKeys.privateKey, kid: "attacker", more: CARRIED_KEY }, aud)}`,
      "The JWT's kid names no key of its issuer.",
    ],
  ];

  describe.each(PROVIDERS)("at the URL of $kind", ({ name }) => {
    it.each(unauthenticated)("401 invalid_token, nothing ended: %s", async (_, authorization, description) => {
      const user = newUser();
      const subject = `sub-${crypto.randomUUID()}`;
      const session = await signIn(user, subject, null, name);
      const log = vi.spyOn(console, "log");
      await expectRefused(
        await revoke(subject, await authorization(urlOf(name)), { name }),
        description,
        "invalid_token",
        401,
      );
      expect(linesOf(log, "upstream_call")).toEqual([
        { ...REFUSED_LINE, upstream: name, route: "global_revocation", status: 401, error: "invalid_token" },
      ]);
      expect(await isLive(session.token)).toBe(true);
      expect(await loggedFor(user, session.id)).toEqual([{ type: "created", reason: null, actor_session_id: null }]);
    });

    it("its JWT acted on once: sent again for its subject, it ends nothing; for another, 401", async () => {
      const [user, victim] = [newUser(), newUser()];
      const [subject, victimSubject] = [`sub-${crypto.randomUUID()}`, `sub-${crypto.randomUUID()}`];
      const first = await signIn(user, subject, null, name);
      const victims = await signIn(victim, victimSubject, null, name);
      const token = await jwt({ iat: now() + 50 }, {}, urlOf(name));
      await expectDone(await revoke(subject, `Bearer ${token}`, { name }), 204);
      const since = await signIn(user, subject, null, name);
      await expectDone(await revoke(subject, `Bearer ${token}`, { name }), 204);
      await expectRefused(
        await revoke(victimSubject, `Bearer ${token}`, { name }),
        "The JWT was used before for another subject.",
        "invalid_token",
        401,
      );
      expect(await liveness(first.token, since.token, victims.token)).toEqual([false, true, true]);
      expect(await loggedFor(user, first.id)).toEqual([
        { type: "created", reason: null, actor_session_id: null },
        { type: "ended_by_upstream", reason: `${name}:global_revocation`, actor_session_id: null },
      ]);
    });
  });

  it("a request it cannot act on: 400 invalid_request or 403 access_denied, nothing ended", async () => {
    const user = newUser();
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(user, subject, null);
    const auth = async () => `Bearer ${await jwt()}`;
    const body = (subId: unknown) => JSON.stringify({ sub_id: subId });
    await expectRefused(
      await revoke(subject, await auth(), { contentType: "text/plain" }),
      "The Content-Type is not application/json.",
    );
    const shape = "The body is not a JSON object with a sub_id subject identifier (RFC 9493).";
    await expectRefused(await revoke(subject, await auth(), { body: "{not json" }), shape);
    await expectRefused(await revoke(subject, await auth(), { body: "{}" }), shape);
    await expectRefused(
      await revoke(subject, await auth(), { body: body({ format: "email", email: "a@corp.example" }) }),
      'The sub_id format "email" is not supported: use iss_sub.',
    );
    await expectRefused(
      await revoke(subject, await auth(), { body: body({ format: "opaque", id: user }) }),
      'The sub_id format "opaque" is not supported: use iss_sub.',
    );
    await expectRefused(
      await revoke(subject, await auth(), { body: body({ format: "iss_sub", iss: OTHER, sub: subject }) }),
      "The sub_id's iss is not this upstream's issuer: an upstream revokes its own users only.",
      "access_denied",
      403,
    );
    await expectRefused(
      await revoke(subject, await auth(), { body: `{"sub_id": "${"a".repeat(16_400)}"}` }),
      "The body is longer than 16384 bytes.",
    );
    expect(await isLive(session.token)).toBe(true);
  });

  it("its typ: JWT, with or without application/, in any case, or none; a logout token's refused", async () => {
    for (const typ of ["JWT", "jwt", "application/jwt", null]) {
      const subject = `sub-${crypto.randomUUID()}`;
      const session = await signIn(newUser(), subject, null);
      await expectDone(await revoke(subject, `Bearer ${await jwt({}, { typ })}`), 204);
      expect(await isLive(session.token)).toBe(false);
    }
    for (const typ of ["logout+jwt", "application/at+jwt"])
      await expectRefused(
        await revoke("s", `Bearer ${await jwt({}, { typ })}`),
        "The JWT is a token of another kind (typ, nonce or events).",
        "invalid_token",
        401,
      );
  });

  it("the 60 s of skew hold for its exp too: 59 s past is accepted", async () => {
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(newUser(), subject, null);
    await expectDone(await revoke(subject, `Bearer ${await jwt({ exp: now() - 59 })}`), 204);
    expect(await isLive(session.token)).toBe(false);
  });

  it("a body of 16,384 bytes is read; one byte more is refused", async () => {
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(newUser(), subject, null);
    const sized = (bytes: number) => {
      const start = `{"sub_id": {"format": "iss_sub", "iss": "${CORP}", "sub": "${subject}"}, "pad": "`;
      return `${start}${"a".repeat(bytes - start.length - 2)}"}`;
    };
    expect(new TextEncoder().encode(sized(16_384)).length).toBe(16_384);
    await expectRefused(
      await revoke(subject, `Bearer ${await jwt()}`, { body: sized(16_385) }),
      "The body is longer than 16384 bytes.",
    );
    expect(await isLive(session.token)).toBe(true);
    await expectDone(await revoke(subject, `Bearer ${await jwt()}`, { body: sized(16_384) }), 204);
    expect(await isLive(session.token)).toBe(false);
  });

  it("its aud is the URL the worker is called at, origin and path: the query is not part of it, a proxy's X-Forwarded-Host not read", async () => {
    const subject = `sub-${crypto.randomUUID()}`;
    const session = await signIn(newUser(), subject, null);
    const body = JSON.stringify({ sub_id: { format: "iss_sub", iss: CORP, sub: subject } });
    const post = async (path: string, aud: string, headers: Record<string, string> = {}) =>
      callWith(
        VARS,
        "POST",
        path,
        { Authorization: `Bearer ${await jwt({ aud })}`, "Content-Type": "application/json", ...headers },
        body,
      );
    const publicUrl = `https://sso-gateway.example${PATH}`;
    await expectRefused(
      await post(PATH, publicUrl, { "X-Forwarded-Host": "sso-gateway.example", Forwarded: "host=sso-gateway.example" }),
      "The JWT's aud is not this URL.",
      "invalid_token",
      401,
    );
    await expectRefused(
      await post(`${PATH}?tenant=acme`, `${URL}?tenant=acme`),
      "The JWT's aud is not this URL.",
      "invalid_token",
      401,
    );
    expect(await isLive(session.token)).toBe(true);
    await expectDone(await post(`${PATH}?tenant=acme`, URL), 204);
    expect(await isLive(session.token)).toBe(false);
  });
});
