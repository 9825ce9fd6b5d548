import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createLocalJWKSet, exportJWK, generateKeyPair, type JSONWebKeySet, jwtVerify, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readUpstreams } from "../src/domain/upstreams/config.ts";
import { readUpstreamReceivers } from "../src/domain/upstreams/receivers.ts";
import worker from "../src/index.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { recordingD1 } from "./d1.ts";
import { CHROME_MAC, callWith, d1, d1OfUser, databases, FIREFOX_LINUX, newUser, sessionCookie } from "./helpers.ts";
import { ISSUER, transmitter } from "./ssf.ts";

// Sign-outs sent back (IPSIE SL3): an upstream with `push` in SSF_UPSTREAMS gets a CAEP
// session-revoked, in its own ids, whenever a session signed in through it ends here, and a
// session-established at the sign-in; pushed after the answer (RFC 8935) with the streams'
// retries, never for an ending it asked for itself.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";
const ESTABLISHED = `${CAEP}session-established`;
const REVOKED = `${CAEP}session-revoked`;
const ACCOUNT_DISABLED = "https://schemas.openid.net/secevent/risc/event-type/account-disabled";
const BCL_EVENT = "http://schemas.openid.net/event/backchannel-logout";
const CLIENT_ID = "sessions-app";
/** What SSF_ISSUER's SETs to this service carry as `aud` (the upstreams' `audience`). */
const OUR_AUDIENCE = "https://sessions.example/ssf";

const idpKeys = await generateKeyPair("ES256", { extractable: true });
const IDP_JWKS = { keys: [{ ...(await exportJWK(idpKeys.publicKey)), kid: "idp1", alg: "ES256" }] };
const now = () => Math.floor(Date.now() / 1000);

interface Pushed {
  url: string;
  authorization: string | null;
  contentType: string | null;
  token: string;
}

/**
 * A transmitter and an upstream of its own name (so SETs a test leaves queued go to no other
 * test), with `push` as given, and `other`, an upstream that takes nothing. Every push is
 * recorded and answered `status()`.
 */
async function setUp(push: Record<string, unknown> | null = {}, extra: Partial<Env> = {}) {
  const name = `idp-${crypto.randomUUID().slice(0, 8)}`;
  const issuer = `https://${name}.example`;
  const endpoint = `https://${name}.example/ssf/push`;
  const upstream = {
    issuer,
    name,
    client_id: CLIENT_ID,
    audience: OUR_AUDIENCE,
    subject: "iss_sub",
    jwks: IDP_JWKS,
    ...(push === null ? {} : { push: { endpoint_url: endpoint, ...push } }),
  };
  // Names users by this service's ids: it ends sessions of users never signed in through it.
  const other = {
    issuer: `https://other-${name}.example`,
    name: `other-${name}`,
    audience: OUR_AUDIENCE,
    subject: "iss_sub",
    subjects_are_user_ids: true,
    client_id: CLIENT_ID,
    jwks: IDP_JWKS,
  };
  const { vars: transmitterVars } = await transmitter();
  const vars: Partial<Env> = { ...transmitterVars, SSF_UPSTREAMS: JSON.stringify([upstream, other]), ...extra };
  const pushes: Pushed[] = [];
  let status = 202;
  const unexpected: string[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    if (request.url !== endpoint) {
      unexpected.push(request.url);
      return new Response(null, { status: 404 });
    }
    pushes.push({
      url: request.url,
      authorization: request.headers.get("Authorization"),
      contentType: request.headers.get("Content-Type"),
      token: new TextDecoder().decode(await request.arrayBuffer()),
    });
    return new Response(null, { status });
  });
  const jwks = (await (await callWith(vars, "GET", "/ssf/jwks.json")).json()) as JSONWebKeySet;
  /** A push's SET, verified with the transmitter's published keys, for the audience `audience`. */
  const verified = async (pushed: Pushed, audience = issuer) => {
    const { payload, protectedHeader } = await jwtVerify(pushed.token, createLocalJWKSet(jwks), {
      issuer: ISSUER,
      audience,
      typ: "secevent+jwt",
    });
    return { payload, protectedHeader };
  };
  const rpc = async <T>(call: (service: SessionService) => Promise<T>, more: Partial<Env> = {}): Promise<T> => {
    const ctx = createExecutionContext();
    const answer = await call(new SessionService(ctx, { ...env, ...vars, ...more }));
    await waitOnExecutionContext(ctx);
    return answer;
  };
  /** A session signed in through the upstream (or `through`), as a login flow does after its callback. */
  const signIn = (userId: string, subject: string, sid: string | null, through = name, more: Partial<Env> = {}) =>
    rpc(
      (service) =>
        service.create({
          userId,
          userAgent: CHROME_MAC,
          carrier: "both",
          upstream: { provider: through, subject, sid },
        }),
      more,
    );
  const local = (userId: string) => rpc((service) => service.create({ userId, userAgent: CHROME_MAC }));
  return {
    name,
    issuer,
    endpoint,
    other,
    vars,
    pushes,
    unexpected,
    verified,
    rpc,
    signIn,
    local,
    answer: (next: number) => {
      status = next;
    },
  };
}

type Setup = Awaited<ReturnType<typeof setUp>>;

/** The one event of a SET, with its type. */
function eventOf(payload: Record<string, unknown>): Record<string, unknown> & { type: string } {
  const [[type, event]] = Object.entries(payload.events as Record<string, Record<string, unknown>>) as [
    [string, Record<string, unknown>],
  ];
  return { type, ...event };
}

/** The SETs pushed so far, verified, as (event type, subject, initiator, reason). */
async function pushedSets(setup: Setup) {
  return Promise.all(
    setup.pushes.map(async (pushed) => {
      const { payload } = await setup.verified(pushed);
      const event = eventOf(payload);
      return {
        type: event.type,
        sub_id: payload.sub_id,
        initiating_entity: event.initiating_entity,
        reason: (event.reason_admin as { en: string } | undefined)?.en,
      };
    }),
  );
}

/** The upstream's own ids, as its SETs name them. */
const subjectOf = (setup: Setup, sub: string, sid: string | null) => ({
  format: "complex",
  user: { format: "iss_sub", iss: setup.issuer, sub },
  ...(sid === null ? {} : { session: { format: "opaque", id: sid } }),
});

/** A back-channel logout of the upstream, for `sid`. */
async function backchannelLogout(setup: Setup, sub: string, sid: string) {
  const token = await new SignJWT({
    iss: setup.issuer,
    aud: CLIENT_ID,
    iat: now(),
    exp: now() + 120,
    jti: crypto.randomUUID(),
    sub,
    sid,
    events: { [BCL_EVENT]: {} },
  })
    .setProtectedHeader({ alg: "ES256", kid: "idp1", typ: "logout+jwt" })
    .sign(idpKeys.privateKey);
  return callWith(
    setup.vars,
    "POST",
    `/upstreams/${setup.name}/backchannel-logout`,
    { "Content-Type": "application/x-www-form-urlencoded" },
    new URLSearchParams({ logout_token: token }).toString(),
  );
}

/** A global token revocation of the upstream, for its subject `sub` (Okta's Universal Logout). */
async function globalRevocation(setup: Setup, sub: string) {
  const path = `/upstreams/${setup.name}/global-token-revocation`;
  const jwt = await new SignJWT({
    iss: setup.issuer,
    aud: `https://sessions.example${path}`,
    iat: now(),
    exp: now() + 300,
    jti: crypto.randomUUID(),
  })
    .setProtectedHeader({ alg: "ES256", kid: "idp1", typ: "JWT" })
    .sign(idpKeys.privateKey);
  return callWith(
    setup.vars,
    "POST",
    path,
    { "Content-Type": "application/json", Authorization: `Bearer ${jwt}` },
    JSON.stringify({ sub_id: { format: "iss_sub", iss: setup.issuer, sub } }),
  );
}

/** A RISC account-disabled SET about `userId` from `issuer`, pushed to POST /ssf/inbound. */
/** RISC account-disabled by `issuer` for `sub`: its own subject, or (the other upstream) this service's user id. */
async function accountDisabled(setup: Setup, issuer: string, sub: string) {
  const set = await new SignJWT({
    iss: issuer,
    aud: OUR_AUDIENCE,
    iat: now(),
    jti: crypto.randomUUID(),
    sub_id: { format: "iss_sub", iss: issuer, sub },
    events: { [ACCOUNT_DISABLED]: {} },
  })
    .setProtectedHeader({ alg: "ES256", kid: "idp1", typ: "secevent+jwt" })
    .sign(idpKeys.privateKey);
  return callWith(setup.vars, "POST", "/ssf/inbound", { "Content-Type": "application/secevent+jwt" }, set);
}

/** The user's events as the security log holds them: type and reason. */
async function eventsOf(userId: string) {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT type, reason, pending_delivery FROM session_events WHERE user_id = ? ORDER BY id")
    .bind(userId)
    .all<{ type: string; reason: string | null; pending_delivery: number }>();
  return results;
}

/** The SETs waiting for the upstream's pushes. */
const waiting = async (setup: Setup) =>
  (
    await d1("DB")
      .prepare("SELECT jti, attempts, next_attempt_at FROM ssf_queued_sets WHERE stream_id = ?")
      .bind(`upstream:${setup.name}`)
      .all<{ jti: string; attempts: number; next_attempt_at: number }>()
  ).results;

describe("session-established at the sign-in", () => {
  it("names the upstream's subject and sid, signed with the transmitter's key, for the upstream's issuer", async () => {
    const setup = await setUp();
    await setup.signIn(newUser(), "idp-user-1", "sid-1");
    expect(setup.pushes).toHaveLength(1);
    const [pushed] = setup.pushes;
    expect(pushed?.url).toBe(setup.endpoint);
    expect(pushed?.contentType).toBe("application/secevent+jwt");
    expect(pushed?.authorization).toBeNull();
    const { payload, protectedHeader } = await setup.verified(pushed as Pushed);
    expect(protectedHeader).toEqual({ alg: "ES256", kid: "k1", typ: "secevent+jwt" });
    expect(payload).toEqual({
      iss: ISSUER,
      aud: setup.issuer,
      iat: expect.any(Number),
      jti: expect.any(String),
      txn: expect.any(String),
      sub_id: subjectOf(setup, "idp-user-1", "sid-1"),
      events: { [ESTABLISHED]: { event_timestamp: expect.any(Number) } },
    });
    expect(await waiting(setup)).toEqual([]);
  });

  it("without a sid the subject has no session member; the configured audience is the aud", async () => {
    const setup = await setUp({ audience: "https://idp.example/receiver" });
    await setup.signIn(newUser(), "idp-user-2", null);
    const { payload } = await setup.verified(setup.pushes[0] as Pushed, "https://idp.example/receiver");
    expect(payload.sub_id).toEqual(subjectOf(setup, "idp-user-2", null));
  });
});

describe("session-established when the provider's session_expiry ends the session", () => {
  it("is pushed: the created event's reason <upstream>:session_expiry is its bound, not an ending it caused", async () => {
    const setup = await setUp();
    const sessionExpiry = now() + 600;
    await setup.rpc((service) =>
      service.create({
        userId: newUser(),
        userAgent: CHROME_MAC,
        upstream: { provider: setup.name, subject: "sub-e", sid: "sid-e", session_expiry: sessionExpiry },
      }),
    );
    expect(await pushedSets(setup)).toEqual([
      {
        type: ESTABLISHED,
        sub_id: subjectOf(setup, "sub-e", "sid-e"),
        initiating_entity: undefined,
        reason: undefined,
      },
    ]);
  });
});

describe("session-revoked for every ending here", () => {
  it("nothing for a session signed in without a sid: a subject alone would end all the user's sessions there", async () => {
    const setup = await setUp();
    const session = await setup.signIn(newUser(), "sub-no-sid", null);
    expect((await callWith(setup.vars, "POST", "/auth/logout", sessionCookie(session.token))).status).toBe(200);
    expect((await pushedSets(setup)).map((set) => set.type)).toEqual([ESTABLISHED]);
    expect(await waiting(setup)).toEqual([]);
  });

  it("the user's sign-out (POST /auth/logout)", async () => {
    const setup = await setUp();
    const session = await setup.signIn(newUser(), "sub-a", "sid-a");
    expect((await callWith(setup.vars, "POST", "/auth/logout", sessionCookie(session.token))).status).toBe(200);
    expect((await pushedSets(setup)).at(-1)).toEqual({
      type: REVOKED,
      sub_id: subjectOf(setup, "sub-a", "sid-a"),
      initiating_entity: "user",
      reason: "The user signed out",
    });
  });

  it("sign-out everywhere, sign-out everywhere else and a deletion: each session in its own ids", async () => {
    const setup = await setUp();
    const userId = newUser();
    const [a, b] = [await setup.signIn(userId, "sub", "sid-a"), await setup.signIn(userId, "sub", "sid-b")];
    await setup.signIn(userId, "sub", "sid-c");
    await setup.signIn(userId, "sub", "sid-d");
    expect((await callWith(setup.vars, "DELETE", `/auth/sessions/${b.id}`, sessionCookie(a.token))).status).toBe(200);
    expect((await callWith(setup.vars, "DELETE", "/auth/logout?scope=others", sessionCookie(a.token))).status).toBe(
      200,
    );
    const e = await setup.signIn(userId, "sub", "sid-e");
    expect((await callWith(setup.vars, "DELETE", "/auth/logout", sessionCookie(e.token))).status).toBe(200);
    const revoked = (await pushedSets(setup)).filter((set) => set.type === REVOKED);
    expect(revoked.map((set) => [set.sub_id, set.initiating_entity, set.reason]).sort()).toEqual(
      [
        [subjectOf(setup, "sub", "sid-b"), "user", "The user signed this session out from another"],
        [subjectOf(setup, "sub", "sid-c"), "user", "The user signed out everywhere else"],
        [subjectOf(setup, "sub", "sid-d"), "user", "The user signed out everywhere else"],
        [subjectOf(setup, "sub", "sid-a"), "user", "The user signed out everywhere"],
        [subjectOf(setup, "sub", "sid-e"), "user", "The user signed out everywhere"],
      ].sort(),
    );
  });

  it("the rest of the system's end (endSession, endUserSessions) and the administrator's", async () => {
    const setup = await setUp();
    const userId = newUser();
    const one = await setup.signIn(userId, "sub-s", "sid-1");
    await setup.signIn(userId, "sub-s", "sid-2");
    await setup.rpc((service) => service.endSession({ sessionId: one.id, reason: "admin" }));
    await setup.rpc((service) => service.endUserSessions({ userId, reason: "password_changed" }));
    expect((await pushedSets(setup)).filter((set) => set.type === REVOKED)).toEqual([
      { type: REVOKED, sub_id: subjectOf(setup, "sub-s", "sid-1"), initiating_entity: "admin", reason: "admin" },
      {
        type: REVOKED,
        sub_id: subjectOf(setup, "sub-s", "sid-2"),
        initiating_entity: "system",
        reason: "password_changed",
      },
    ]);
  });

  it("an ending whose reason a caller wrote as <upstream>:… is still told: who ended it decides, not its text", async () => {
    const setup = await setUp();
    const userId = newUser();
    const one = await setup.signIn(userId, "sub-t", "sid-1");
    await setup.signIn(userId, "sub-t", "sid-2");
    const reason = `${setup.name}:offboarding`;
    await setup.rpc((service) => service.endSession({ sessionId: one.id, reason }));
    await setup.rpc((service) => service.endUserSessions({ userId, reason: `${setup.name}:backchannel_logout` }));
    expect((await pushedSets(setup)).filter((set) => set.type === REVOKED)).toEqual([
      { type: REVOKED, sub_id: subjectOf(setup, "sub-t", "sid-1"), initiating_entity: "system", reason },
      {
        type: REVOKED,
        sub_id: subjectOf(setup, "sub-t", "sid-2"),
        initiating_entity: "system",
        reason: `${setup.name}:backchannel_logout`,
      },
    ]);
  });

  it("an eviction over SESSION_MAX_PER_USER", async () => {
    const setup = await setUp();
    const userId = newUser();
    const more = { SESSION_MAX_PER_USER: "1" } as Partial<Env>;
    await setup.signIn(userId, "sub-e", "sid-old", setup.name, more);
    await setup.signIn(userId, "sub-e", "sid-new", setup.name, more);
    expect((await pushedSets(setup)).filter((set) => set.type === REVOKED)).toEqual([
      {
        type: REVOKED,
        sub_id: subjectOf(setup, "sub-e", "sid-old"),
        initiating_entity: "policy",
        reason: "Over the limit of sessions per user",
      },
    ]);
  });

  it("the context check's end: the cookie used from another device under SESSION_CONTEXT_DEVICE=end", async () => {
    const setup = await setUp();
    const userId = newUser();
    const session = await setup.signIn(userId, "sub-c", "sid-c");
    const headers = { ...sessionCookie(session.token), "User-Agent": FIREFOX_LINUX };
    const vars = { ...setup.vars, SESSION_CONTEXT_DEVICE: "end" } as Partial<Env>;
    expect((await callWith(vars, "GET", "/auth/whoami", headers)).status).toBe(401);
    expect((await eventsOf(userId)).map((event) => [event.type, event.reason])).toEqual([
      ["created", null],
      ["ended", "context_changed"],
    ]);
    expect((await pushedSets(setup)).at(-1)).toEqual({
      type: REVOKED,
      sub_id: subjectOf(setup, "sub-c", "sid-c"),
      initiating_entity: "system",
      reason: "context_changed",
    });
  });

  it("another upstream's ending of the user's sessions: the upstream that signed the session in is told", async () => {
    const setup = await setUp();
    const userId = newUser();
    await setup.signIn(userId, "sub-o", "sid-o");
    expect((await accountDisabled(setup, setup.other.issuer, userId)).status).toBe(202);
    expect((await pushedSets(setup)).at(-1)).toEqual({
      type: REVOKED,
      sub_id: subjectOf(setup, "sub-o", "sid-o"),
      initiating_entity: "system",
      reason: `${setup.other.name}:account-disabled`,
    });
  });
});

describe("no echo, nothing for others", () => {
  it("nothing for an ending the upstream asked for: its back-channel logout, its global revocation, its SET", async () => {
    const setup = await setUp();
    const userId = newUser();
    await setup.signIn(userId, "sub-x", "sid-x");
    await setup.signIn(userId, "sub-x", "sid-y");
    expect((await backchannelLogout(setup, "sub-x", "sid-x")).status).toBe(200);
    expect((await globalRevocation(setup, "sub-x")).status).toBe(204);
    await setup.signIn(userId, "sub-x", "sid-z");
    expect((await accountDisabled(setup, setup.issuer, "sub-x")).status).toBe(202);
    expect((await eventsOf(userId)).map((event) => [event.type, event.reason])).toEqual([
      ["created", null],
      ["created", null],
      ["ended_by_upstream", `${setup.name}:backchannel_logout`],
      ["ended_by_upstream", `${setup.name}:global_revocation`],
      ["created", null],
      ["ended_by_upstream", `${setup.name}:account-disabled`],
    ]);
    expect((await pushedSets(setup)).map((set) => set.type)).toEqual([ESTABLISHED, ESTABLISHED, ESTABLISHED]);
    expect(await waiting(setup)).toEqual([]);
  });

  it("nothing for the endings its own sign-in caused: the subject signed in as another user (upstream_relinked)", async () => {
    const setup = await setUp();
    const [first, second] = [newUser(), newUser()];
    await setup.signIn(first, "sub-r", "sid-shared");
    await setup.signIn(second, "sub-r", "sid-shared");
    expect((await eventsOf(first)).map((event) => [event.type, event.reason])).toEqual([
      ["created", null],
      ["ended", "upstream_relinked"],
    ]);
    expect((await pushedSets(setup)).map((set) => set.type)).toEqual([ESTABLISHED, ESTABLISHED]);
  });

  it("nothing for a session not signed in through it: a local one, or another upstream's", async () => {
    const setup = await setUp();
    const userId = newUser();
    const local = await setup.local(userId);
    const others = await setup.signIn(userId, "sub-z", "sid-z", setup.other.name);
    for (const session of [local, others])
      expect((await callWith(setup.vars, "POST", "/auth/logout", sessionCookie(session.token))).status).toBe(200);
    expect(setup.pushes).toEqual([]);
    expect(setup.unexpected).toEqual([]);
  });

  it("nothing for an upstream without push, nor for an event it did not ask for", async () => {
    const without = await setUp(null);
    const session = await without.signIn(newUser(), "sub-n", "sid-n");
    expect((await callWith(without.vars, "POST", "/auth/logout", sessionCookie(session.token))).status).toBe(200);
    expect(without.pushes).toEqual([]);
    expect(without.unexpected).toEqual([]);
    vi.restoreAllMocks();
    const revokedOnly = await setUp({ events: ["session-revoked"] });
    const next = await revokedOnly.signIn(newUser(), "sub-r", "sid-r");
    expect(revokedOnly.pushes).toEqual([]);
    expect((await callWith(revokedOnly.vars, "POST", "/auth/logout", sessionCookie(next.token))).status).toBe(200);
    expect((await pushedSets(revokedOnly)).map((set) => set.type)).toEqual([REVOKED]);
  });
});

describe("delivery", () => {
  it("the Authorization comes from the secret SSF_UPSTREAM_AUTHORIZATIONS, by the upstream's name", async () => {
    const setup = await setUp();
    const secret = { SSF_UPSTREAM_AUTHORIZATIONS: JSON.stringify({ [setup.name]: "Basic aWRwOnB3" }) };
    await setup.signIn(newUser(), "sub-auth", null, setup.name, secret);
    expect(setup.pushes.map((pushed) => pushed.authorization)).toEqual(["Basic aWRwOnB3"]);
  });

  it("a failing push is retried by the cron's round after the backoff, the same SET; a refusal is not", async () => {
    const setup = await setUp();
    setup.answer(503);
    const userId = newUser();
    await setup.signIn(userId, "sub-f", "sid-f");
    expect(setup.pushes).toHaveLength(1);
    const [queued] = await waiting(setup);
    expect(queued).toEqual({ jti: expect.any(String), attempts: 1, next_attempt_at: expect.any(Number) });
    // Every event was delivered to the outbox's queue: nothing is pending.
    expect((await eventsOf(userId)).map((event) => event.pending_delivery)).toEqual([0]);
    setup.answer(202);
    const cron = async (at: number) => {
      const ctx = createExecutionContext();
      const controller = createScheduledController({ scheduledTime: at, cron: "* * * * *" });
      await worker.scheduled(controller, { ...env, ...setup.vars }, ctx);
      await waitOnExecutionContext(ctx);
    };
    await cron((queued?.next_attempt_at as number) - 1);
    expect(setup.pushes).toHaveLength(1);
    await cron(queued?.next_attempt_at as number);
    expect(setup.pushes).toHaveLength(2);
    const jtis = await Promise.all(setup.pushes.map(async (pushed) => (await setup.verified(pushed)).payload.jti));
    expect(jtis).toEqual([queued?.jti, queued?.jti]);
    expect(await waiting(setup)).toEqual([]);
    setup.answer(400);
    await setup.signIn(userId, "sub-f", "sid-g");
    expect(setup.pushes).toHaveLength(3);
    expect(await waiting(setup)).toEqual([]);
  });

  it("with no live stream, only the events of sessions signed in through an upstream are written pending: a local session pays nothing", async () => {
    const setup = await setUp();
    // A first sending sees no live stream, for the minute that follows.
    await setup.signIn(newUser(), "sub-first", null);
    const recorded = Object.entries(databases()).map(([binding, d1]) => [binding, recordingD1(d1)] as const);
    const vars = { ...setup.vars, ...Object.fromEntries(recorded.map(([binding, { db }]) => [binding, db])) };
    const marks = () =>
      recorded.flatMap(([, { statements }]) => statements).filter(({ sql }) => /^update "session_events"/i.test(sql));
    const userId = newUser();
    const local = await setup.local(userId);
    expect((await callWith(vars, "POST", "/auth/logout", sessionCookie(local.token))).status).toBe(200);
    expect(marks()).toEqual([]);
    const upstream = await setup.signIn(userId, "sub-u", "sid-u");
    expect((await callWith(vars, "POST", "/auth/logout", sessionCookie(upstream.token))).status).toBe(200);
    expect(marks()).toHaveLength(1);
    expect((await eventsOf(userId)).map((event) => [event.type, event.pending_delivery])).toEqual([
      ["created", 0],
      ["logout", 0],
      ["created", 0],
      ["logout", 0],
    ]);
  });

  it("a refused SSF_UPSTREAM_AUTHORIZATIONS: the sign-out is answered, its event stays pending, one line names the var; the cron sends it once fixed", async () => {
    const setup = await setUp();
    const userId = newUser();
    const session = await setup.signIn(userId, "sub-p", "sid-p");
    const lines: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: string) => void lines.push(line));
    const broken = { ...setup.vars, SSF_UPSTREAM_AUTHORIZATIONS: JSON.stringify({ nobody: "Bearer x" }) };
    expect((await callWith(broken, "POST", "/auth/logout", sessionCookie(session.token))).status).toBe(200);
    expect((await eventsOf(userId)).map((event) => [event.type, event.pending_delivery])).toEqual([
      ["created", 0],
      ["logout", 1],
    ]);
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      expect.objectContaining({
        event: "outbox_send_failed",
        name: "ConfigError",
        message:
          "SSF_UPSTREAM_AUTHORIZATIONS must be a JSON object of upstream name to Authorization: each name is an upstream of SSF_UPSTREAMS with push",
      }),
    ]);
    expect(lines.join("\n")).not.toContain("Bearer x");
    expect(setup.pushes).toHaveLength(1);
    // The minute cron while it is still refused: one failure, one line with the run's site (not one
    // per database with the event pending and one more for the pushes); the event stays pending.
    lines.length = 0;
    const refusedRun = createExecutionContext();
    const minute = createScheduledController({ scheduledTime: Date.now() + 61_000, cron: "* * * * *" });
    await worker.scheduled(minute, { ...env, ...broken }, refusedRun);
    await waitOnExecutionContext(refusedRun);
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      {
        level: "error",
        event: "config_error",
        message:
          "SSF_UPSTREAM_AUTHORIZATIONS must be a JSON object of upstream name to Authorization: each name is an upstream of SSF_UPSTREAMS with push",
        cron: "delivery",
        request_id: expect.any(String),
      },
    ]);
    expect((await eventsOf(userId)).map((event) => event.pending_delivery)).toEqual([0, 1]);
    expect(setup.pushes).toHaveLength(1);
    const ctx = createExecutionContext();
    const controller = createScheduledController({ scheduledTime: Date.now() + 61_000, cron: "* * * * *" });
    await worker.scheduled(controller, { ...env, ...setup.vars }, ctx);
    await waitOnExecutionContext(ctx);
    expect((await pushedSets(setup)).map((set) => set.type)).toEqual([ESTABLISHED, REVOKED]);
    expect((await eventsOf(userId)).map((event) => event.pending_delivery)).toEqual([0, 0]);
  });
});

describe("configuration", () => {
  const entry = (push: unknown) => ({
    issuer: "https://idp.example",
    name: "idp",
    client_id: CLIENT_ID,
    jwks: IDP_JWKS,
    ...(push === undefined ? {} : { push }),
  });
  const upstreams = (push: unknown) => ({ SSF_UPSTREAMS: JSON.stringify([entry(push)]) });
  const prefix = "SSF_UPSTREAMS must be a JSON array of upstreams: push ";

  it("push: endpoint_url (https, or http on loopback), audience defaulting to the issuer, events defaulting to both", () => {
    expect(readUpstreams(upstreams(undefined))[0]?.push).toBeNull();
    expect(readUpstreams(upstreams({ endpoint_url: "https://idp.example/ssf" }))[0]?.push).toEqual({
      endpointUrl: "https://idp.example/ssf",
      audience: "https://idp.example",
      events: ["session-revoked", "session-established"],
    });
    const local = { endpoint_url: "http://127.0.0.1:8787/push", audience: "idp", events: ["session-revoked"] };
    expect(readUpstreams(upstreams(local))[0]?.push).toEqual({
      endpointUrl: "http://127.0.0.1:8787/push",
      audience: "idp",
      events: ["session-revoked"],
    });
  });

  it.each([
    ["https://idp.example/ssf", "is an object of endpoint_url and optionally audience and events"],
    [{ endpoint_url: "https://idp.example/ssf", authorization: "Bearer x" }, "is an object of"],
    [{}, "endpoint_url is an https URL"],
    [{ endpoint_url: "http://idp.example/ssf" }, "endpoint_url is an https URL (http only on a loopback host)"],
    [{ endpoint_url: "https://user:pw@idp.example/ssf" }, "endpoint_url is an https URL"],
    [{ endpoint_url: "https://idp.example/ssf#x" }, "endpoint_url is an https URL"],
    [{ endpoint_url: "https://idp.example/ssf", audience: "" }, "audience, when given, is a non-empty string"],
    [{ endpoint_url: "https://idp.example/ssf", events: [] }, "events, when given, lists some of"],
    [{ endpoint_url: "https://idp.example/ssf", events: ["risk-level-change"] }, "events, when given, lists some of"],
    [
      { endpoint_url: "https://idp.example/ssf", events: ["session-revoked", "session-revoked"] },
      "events, when given, lists some of session-revoked, session-established, each once",
    ],
  ])("refuses push %j, naming the rule", (push, rule) => {
    expect(() => readUpstreams(upstreams(push))).toThrow(`${prefix}${rule}`);
  });

  it.each([
    ["not json", "not JSON"],
    ['["Bearer x"]', "not an object"],
    ['{"nobody":"Bearer x"}', "each name is an upstream of SSF_UPSTREAMS with push"],
    ['{"idp":""}', "each value is 1 to 1024 printable ASCII characters"],
    ['{"idp":"Bearer x\\r\\nX-Injected: 1"}', "each value is 1 to 1024 printable ASCII characters"],
    ['{"idp":" Bearer x"}', "each value is 1 to 1024 printable ASCII characters"],
    [JSON.stringify({ idp: `Bearer ${"x".repeat(1024)}` }), "each value is 1 to 1024 printable ASCII characters"],
  ])("refuses SSF_UPSTREAM_AUTHORIZATIONS %s, naming the rule and never the value", (secret, rule) => {
    const vars = { ...upstreams({ endpoint_url: "https://idp.example/ssf" }), SSF_UPSTREAM_AUTHORIZATIONS: secret };
    const refused = (() => {
      try {
        readUpstreamReceivers(vars);
      } catch (error) {
        return error as Error;
      }
      return null;
    })();
    expect(refused?.name).toBe("ConfigError");
    expect(refused?.message).toBe(
      `SSF_UPSTREAM_AUTHORIZATIONS must be a JSON object of upstream name to Authorization: ${rule}`,
    );
  });

  it("an upstream without push takes no authorization; one with push may go without", () => {
    const vars = { ...upstreams(undefined), SSF_UPSTREAM_AUTHORIZATIONS: '{"idp":"Bearer x"}' };
    expect(() => readUpstreamReceivers(vars)).toThrow("each name is an upstream of SSF_UPSTREAMS with push");
    expect(readUpstreamReceivers(upstreams({ endpoint_url: "https://idp.example/ssf" }))).toEqual([
      expect.objectContaining({ destination: "upstream:idp", authorization: null }),
    ]);
  });
});
