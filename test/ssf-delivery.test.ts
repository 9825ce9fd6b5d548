import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { compactVerify, createLocalJWKSet, decodeJwt, type JSONWebKeySet } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { wrapD1 } from "../src/db/d1.ts";
import { openShards } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import { readTransmitter, type Transmitter } from "../src/domain/ssf/transmitter.ts";
import worker from "../src/index.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { LEFT_TO_THE_CRON } from "../src/services/outbox.ts";
import { PUSH_LEASE_MS, pushDue } from "../src/services/ssf/delivery.ts";
import { endSession } from "../src/services/user-sessions.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  callWith,
  d1,
  d1OfUser,
  FIREFOX_LINUX,
  type Network,
  newUser,
  newUserOn,
  scopeWith,
  sessionCookie,
} from "./helpers.ts";
import { ISSUER, newReceiver, privateJwk, ssfCall, transmitter, transmitterVars } from "./ssf.ts";

// Session events as Shared Signals: every way a session starts or ends becomes a CAEP SET for
// the streams that asked for it, polled or pushed, after the answer.

const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";
const ESTABLISHED = `${CAEP}session-established`;
const REVOKED = `${CAEP}session-revoked`;
const LEVEL = `${CAEP}assurance-level-change`;
const RISK = `${CAEP}risk-level-change`;
const AUDIENCE = "https://receiver.example";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

async function setUp(extra: Partial<Env> = {}, stream: Record<string, unknown> = {}) {
  const { vars } = await transmitter(extra);
  const receiver = await newReceiver(AUDIENCE);
  const as = (method: string, path: string, body?: unknown) => ssfCall(vars, receiver.credential, method, path, body);
  const created = await as("POST", "/ssf/streams", stream);
  const { stream_id } = (await created.json()) as { stream_id: string };
  /** Runs one SessionService call with the transmitter on, and waits for what it sends after. */
  const rpc = async <T>(call: (service: SessionService) => Promise<T>): Promise<T> => {
    const ctx = createExecutionContext();
    const answer = await call(new SessionService(ctx, { ...env, ...vars }));
    await waitOnExecutionContext(ctx);
    return answer;
  };
  // A browser's session whose token its page also sends as Bearer: its cookie is judged by its context.
  const login = (userId: string) =>
    rpc((service) => service.create({ userId, userAgent: CHROME_MAC, ipAddress: "203.0.113.7", carrier: "both" }));
  const poll = async () => {
    const response = await as("POST", `/ssf/streams/poll/${stream_id}`, { returnImmediately: true });
    const { sets } = (await response.json()) as { sets: Record<string, string> };
    return Object.values(sets).map((set) => decodeJwt(set));
  };
  return { vars, as, stream_id, rpc, login, poll };
}

/** Runs the worker's `cron` now (the faked time, if any) with `vars`, and what it leaves running. */
async function runCron(cron: string, vars: Partial<Env>) {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron }), { ...env, ...vars }, ctx);
  await waitOnExecutionContext(ctx);
}

/** How many SETs wait for the stream. */
const waitingFor = async (streamId: string) =>
  (
    await d1("DB")
      .prepare("SELECT count(*) AS n FROM ssf_queued_sets WHERE stream_id = ?")
      .bind(streamId)
      .first<{ n: number }>()
  )?.n;

/** The one event of a SET, with its type. */
const eventOf = (claims: Record<string, unknown>): Record<string, unknown> & { type: string } => {
  const [[type, event]] = Object.entries(claims.events as Record<string, Record<string, unknown>>) as [
    [string, Record<string, unknown>],
  ];
  return { type, ...event };
};

describe("each session event becomes a SET", () => {
  it("support access: its opening is the administrator's, and its end names the agent; ending itself is the agent's act", async () => {
    const { vars, rpc, login, poll } = await setUp();
    const userId = newUser();
    const own = await login(userId);
    const open = () =>
      rpc((service) => service.openSupportSession({ userId, agentId: "agent-ada", reason: "Ticket 4711" }));
    const [first, second] = [await open(), await open()];
    expect((await callWith(vars, "DELETE", `/auth/sessions/${first.id}`, bearer(own.token))).status).toBe(200);
    expect((await callWith(vars, "POST", "/auth/logout", bearer(second.token))).status).toBe(200);
    const sets = (await poll()).map((claims) => [
      (claims.sub_id as { session: { id: string } }).session.id,
      eventOf(claims),
    ]);
    const of = (id: string) => sets.filter(([session]) => session === id).map(([, event]) => event);
    expect(of(own.id)).toEqual([expect.not.objectContaining({ initiating_entity: expect.anything() })]);
    expect(of(first.id)).toEqual([
      expect.objectContaining({
        type: ESTABLISHED,
        initiating_entity: "admin",
        reason_admin: { en: "Opened as support access by agent-ada" },
      }),
      expect.objectContaining({
        type: REVOKED,
        initiating_entity: "user",
        reason_admin: { en: "The user signed this session out from another (support access by agent-ada)" },
      }),
    ]);
    expect(of(second.id).at(-1)).toEqual(
      expect.objectContaining({
        type: REVOKED,
        initiating_entity: "admin",
        reason_admin: { en: "The agent ended support access by agent-ada" },
      }),
    );
  });

  it("a login is session-established; each way a session ends is session-revoked, saying who and why", async () => {
    const { vars, rpc, login, poll } = await setUp({ SESSION_MAX_PER_USER: "3" });
    const userId = newUser();
    const [a, b, c, d] = [await login(userId), await login(userId), await login(userId), await login(userId)];
    const first = await poll();
    // The eviction is logged by the fourth login's own write, in the same millisecond: any order.
    expect(
      first
        .map(eventOf)
        .map((event) => event.type)
        .sort(),
    ).toEqual([...Array(4).fill(ESTABLISHED), REVOKED]);
    const revoked = async () => (await poll()).filter((claims) => eventOf(claims).type === REVOKED);

    // The cap of 3: the fourth login evicted the least recently active, the first.
    const evicted = first.find((claims) => eventOf(claims).type === REVOKED);
    expect(evicted?.sub_id).toEqual({
      format: "complex",
      session: { format: "opaque", id: a.id },
      user: { format: "iss_sub", iss: ISSUER, sub: userId },
    });
    expect(eventOf(evicted as Record<string, unknown>)).toMatchObject({
      initiating_entity: "policy",
      reason_admin: { en: "Over the limit of sessions per user" },
    });

    expect((await callWith(vars, "DELETE", `/auth/sessions/${b.id}`, bearer(c.token))).status).toBe(200);
    expect((await callWith(vars, "POST", "/auth/logout", bearer(c.token))).status).toBe(200);
    const byUser = await revoked();
    expect(
      byUser.map((claims) => [(claims.sub_id as { session: { id: string } }).session.id, eventOf(claims)]),
    ).toEqual([
      [
        b.id,
        expect.objectContaining({
          initiating_entity: "user",
          reason_admin: { en: "The user signed this session out from another" },
        }),
      ],
      [c.id, expect.objectContaining({ initiating_entity: "user", reason_admin: { en: "The user signed out" } })],
    ]);

    await rpc((service) => service.endSession({ sessionId: d.id, reason: "admin" }));
    const [byAdmin] = await revoked();
    expect(eventOf(byAdmin as Record<string, unknown>)).toMatchObject({
      initiating_entity: "admin",
      reason_admin: { en: "admin" },
    });

    const e = await login(userId);
    await rpc((service) => service.endUserSessions({ userId, reason: "password_changed" }));
    const bySystem = (await revoked()).find(
      (claims) => (claims.sub_id as { session: { id: string } }).session.id === e.id,
    );
    expect(eventOf(bySystem as Record<string, unknown>)).toMatchObject({
      initiating_entity: "system",
      reason_admin: { en: "password_changed" },
    });
  });

  it("a sign-in the user reported from the new-device message is session-revoked by the user, and the SETs carry no report token", async () => {
    const { vars, login, poll } = await setUp();
    const stranger = await login(newUser());
    const reportToken = stranger.reportToken as string;
    expect((await callWith(vars, "POST", "/auth/report", bearer(reportToken))).status).toBe(200);
    const sets = await poll();
    expect(eventOf(sets.at(-1) as Record<string, unknown>)).toMatchObject({
      type: REVOKED,
      initiating_entity: "user",
      reason_admin: { en: "reported_by_user" },
    });
    expect(JSON.stringify(sets)).not.toContain(reportToken.split("~")[1]);
  });

  it("a SET carries iss, aud, iat, jti, txn (the request) and event_timestamp, and no sub or exp", async () => {
    const { vars, login, poll } = await setUp();
    const userId = newUser();
    const before = Math.floor(Date.now() / 1000);
    const session = await login(userId);
    const response = await callWith(vars, "DELETE", "/auth/logout", bearer(session.token));
    expect(response.status).toBe(200);
    const [established, revoked] = await poll();
    for (const claims of [established, revoked] as Record<string, unknown>[]) {
      expect(Object.keys(claims).sort()).toEqual(["aud", "events", "iat", "iss", "jti", "sub_id", "txn"]);
      expect(claims).toMatchObject({ iss: ISSUER, aud: AUDIENCE });
      expect(eventOf(claims).event_timestamp).toBeGreaterThanOrEqual(before);
    }
    expect(eventOf(revoked as Record<string, unknown>)).toMatchObject({
      type: REVOKED,
      initiating_entity: "user",
      reason_admin: { en: "The user signed out everywhere" },
    });
    expect(established?.txn).not.toBe(revoked?.txn);
  });

  it("after a key rotation the newest key signs every SET; the rotated-out one is only published", async () => {
    const now = Math.floor(Date.now() / 1000);
    const keys = [await privateJwk("ES256", "new"), await privateJwk("ES256", "old", { exp: now + 3600 })];
    const { vars, as, stream_id, login } = await setUp(transmitterVars(keys));
    const session = await login(newUser());
    expect((await callWith(vars, "DELETE", "/auth/logout", bearer(session.token))).status).toBe(200);
    const polled = await as("POST", `/ssf/streams/poll/${stream_id}`, { returnImmediately: true });
    const { sets } = (await polled.json()) as { sets: Record<string, string> };
    const keySet = (await (await callWith(vars, "GET", "/ssf/jwks.json")).json()) as JSONWebKeySet;
    expect(keySet.keys.map((key) => key.kid)).toEqual(["new", "old"]);
    expect(Object.values(sets)).toHaveLength(2);
    for (const set of Object.values(sets)) {
      const { protectedHeader } = await compactVerify(set, createLocalJWKSet(keySet));
      expect(protectedHeader).toEqual({ alg: "ES256", kid: "new", typ: "secevent+jwt" });
    }
  });

  it("a re-authentication that changes the assurance level is assurance-level-change (NIST-AAL); one that keeps it sends nothing", async () => {
    const { rpc, poll } = await setUp();
    const userId = newUser();
    const first = await rpc((service) =>
      service.create({ userId, userAgent: CHROME_MAC, ipAddress: "203.0.113.7", factors: ["pwd"] }),
    );
    const reauthenticate = (token: string, assuranceLevel?: 1 | 2 | 3) =>
      rpc((service) => service.reauthenticate({ token, factors: ["otp"], assuranceLevel }));
    const levels = async () =>
      (await poll())
        .filter((claims) => eventOf(claims).type === LEVEL)
        .map((claims) => {
          expect(claims.sub_id).toEqual(expect.objectContaining({ session: { format: "opaque", id: first.id } }));
          const { type: _, event_timestamp, ...change } = eventOf(claims);
          expect(event_timestamp).toEqual(expect.any(Number));
          return change;
        });

    // None known before: the level it now has, with no direction.
    const second = await reauthenticate(first.token, 2);
    expect(await levels()).toEqual([{ namespace: "NIST-AAL", current_level: "nist-aal2", initiating_entity: "user" }]);
    // Unchanged, given again or not given at all: nothing is sent.
    const third = await reauthenticate((second as { token: string }).token, 2);
    const fourth = await reauthenticate((third as { token: string }).token);
    expect(await levels()).toEqual([]);
    // Raised, then lowered.
    const fifth = await reauthenticate((fourth as { token: string }).token, 3);
    await reauthenticate((fifth as { token: string }).token, 1);
    expect(await levels()).toEqual([
      {
        namespace: "NIST-AAL",
        current_level: "nist-aal3",
        previous_level: "nist-aal2",
        change_direction: "increase",
        initiating_entity: "user",
      },
      {
        namespace: "NIST-AAL",
        current_level: "nist-aal1",
        previous_level: "nist-aal3",
        change_direction: "decrease",
        initiating_entity: "user",
      },
    ]);
  });

  it("a context change that holds the session is risk-level-change (SESSION, HIGH); one only logged sends nothing; one that ends it is session-revoked", async () => {
    const abroad = { country: "BR", asn: 28573 };
    const { vars, login, poll } = await setUp({ SESSION_CONTEXT_DEVICE: "hold", SESSION_CONTEXT_NETWORK: "log" });
    const usedFrom = (token: string, userAgent: string, network?: Network, extra: Partial<Env> = {}) =>
      callWith(
        { ...vars, ...extra },
        "GET",
        "/auth/sessions",
        { ...sessionCookie(token), "User-Agent": userAgent },
        undefined,
        network,
      );
    const [held, logged, ended] = [await login(newUser()), await login(newUser()), await login(newUser())];
    expect((await usedFrom(held.token, FIREFOX_LINUX)).status).toBe(401);
    // New York, then Hong Kong at once, on one provider: travel (default hold).
    const travelled = await login(newUser());
    const place = (country: string, latitude: string, longitude: string) => ({
      country,
      asn: 13335,
      latitude,
      longitude,
    });
    expect((await usedFrom(travelled.token, CHROME_MAC, place("US", "40.71280", "-74.00600"))).status).toBe(200);
    expect((await usedFrom(travelled.token, CHROME_MAC, place("HK", "22.31930", "114.16940"))).status).toBe(401);
    expect((await usedFrom(logged.token, CHROME_MAC, abroad)).status).toBe(200);
    expect((await usedFrom(ended.token, FIREFOX_LINUX, undefined, { SESSION_CONTEXT_DEVICE: "end" })).status).toBe(401);
    const sets = (await poll())
      .filter((claims) => eventOf(claims).type !== ESTABLISHED)
      .map((claims) => {
        const { event_timestamp, ...event } = eventOf(claims);
        expect(event_timestamp).toEqual(expect.any(Number));
        return [(claims.sub_id as { session: { id: string } }).session.id, event];
      });
    expect(sets).toEqual([
      [
        held.id,
        {
          type: RISK,
          principal: "SESSION",
          current_level: "HIGH",
          risk_reason: "The session was used from another browser or operating system",
          initiating_entity: "policy",
        },
      ],
      [
        travelled.id,
        {
          type: RISK,
          principal: "SESSION",
          current_level: "HIGH",
          risk_reason: "The session was used from too far away to have travelled there since",
          initiating_entity: "policy",
        },
      ],
      [ended.id, { type: REVOKED, initiating_entity: "system", reason_admin: { en: "context_changed" } }],
    ]);
  });

  it("a hold for travel by Safari's other face names travel: the device is the same one, by the check's own rule", async () => {
    const { vars, rpc, poll } = await setUp();
    const iphone =
      "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const asDesktop =
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
    const newYork = { country: "US", asn: 13335, latitude: "40.71280", longitude: "-74.00600" };
    const session = await rpc((service) =>
      service.create({ userId: newUser(), userAgent: iphone, carrier: "cookie", ...newYork }),
    );
    const hongKong = { country: "HK", asn: 13335, latitude: "22.31930", longitude: "114.16940" };
    const headers = { ...sessionCookie(session.token), "User-Agent": asDesktop };
    expect((await callWith(vars, "GET", "/auth/sessions", headers, undefined, hongKong)).status).toBe(401);
    const risks = (await poll()).filter((claims) => eventOf(claims).type === RISK).map((claims) => eventOf(claims));
    expect(risks).toEqual([
      expect.objectContaining({
        risk_reason: "The session was used from too far away to have travelled there since",
      }),
    ]);
  });

  it("a re-authentication that lifts a hold says the risk fell: risk-level-change LOW from HIGH; one without a hold says nothing of risk", async () => {
    const { vars, rpc, login, poll } = await setUp();
    const [held, plain] = [await login(newUser()), await login(newUser())];
    const headers = { ...sessionCookie(held.token), "User-Agent": FIREFOX_LINUX };
    expect((await callWith(vars, "GET", "/auth/sessions", headers)).status).toBe(401);
    const context = { userAgent: CHROME_MAC };
    expect(
      await rpc((service) => service.reauthenticate({ token: held.token, factors: ["pwd"], context })),
    ).not.toBeNull();
    expect(
      await rpc((service) => service.reauthenticate({ token: plain.token, factors: ["pwd"], context })),
    ).not.toBeNull();
    const risks = (await poll())
      .filter((claims) => eventOf(claims).type === RISK)
      .map((claims) => {
        const { event_timestamp: _, ...event } = eventOf(claims);
        return [(claims.sub_id as { session: { id: string } }).session.id, event.current_level, event];
      });
    expect(risks).toEqual([
      [held.id, "HIGH", expect.objectContaining({ current_level: "HIGH", initiating_entity: "policy" })],
      [
        held.id,
        "LOW",
        {
          type: RISK,
          principal: "SESSION",
          current_level: "LOW",
          previous_level: "HIGH",
          risk_reason: "The user signed in again",
          initiating_entity: "user",
        },
      ],
    ]);
  });

  it("events logged before hold was the one word, their reason step-up, still say the risk when the cron sends them late", async () => {
    const { vars, login, poll } = await setUp();
    const userId = newUser();
    const session = await login(userId);
    await poll();
    // As the release before wrote a hold and its lifting, left pending by a send that failed.
    const at = Date.now() - 120_000;
    const context = {
      before: { browser: "Chrome", os: "macOS", country: null, asn: null },
      after: { browser: "Firefox", os: "Linux", country: null, asn: null },
    };
    await (await d1OfUser(userId))
      .prepare(
        `INSERT INTO session_events (user_id, type, session_id, created_at, request_id, device_key, pending_delivery, reason, context)
         VALUES (?1, 'context_changed', ?2, ?3, 'former-hold', '||', 1, 'step-up', ?4),
                (?1, 'reauthenticated', ?2, ?3 + 1, 'former-lift', '||', 1, 'step-up', NULL)`,
      )
      .bind(userId, session.id, at, JSON.stringify(context))
      .run();
    await runCron("* * * * *", vars);
    const risks = (await poll())
      .map(eventOf)
      .filter((event) => event.type === RISK)
      .map((event) => [event.current_level, event.risk_reason]);
    expect(risks).toEqual([
      ["HIGH", "The session was used from another browser or operating system"],
      ["LOW", "The user signed in again"],
    ]);
  });

  it("a stream gets only the types it asked for, about the users it carries; a disabled one nothing", async () => {
    const { vars, as, stream_id, login, poll } = await setUp({}, { events_requested: [REVOKED] });
    const [kept, other] = [newUser(), newUser()];
    await as("POST", "/ssf/streams/subjects/add", { stream_id, subject: { format: "opaque", id: kept } });
    const [k, o] = [await login(kept), await login(other)];
    await callWith(vars, "POST", "/auth/logout", bearer(k.token));
    await callWith(vars, "POST", "/auth/logout", bearer(o.token));
    const sets = await poll();
    expect(sets.map((claims) => [eventOf(claims).type, (claims.sub_id as { user: { sub: string } }).user.sub])).toEqual(
      [[REVOKED, kept]],
    );

    await as("POST", "/ssf/streams/status", { stream_id, status: "disabled" });
    const again = await login(kept);
    await callWith(vars, "POST", "/auth/logout", bearer(again.token));
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("without a transmitter, events are written as before: not pending, and no SET anywhere", async () => {
    const userId = newUser();
    const ctx = createExecutionContext();
    const service = new SessionService(ctx, env);
    const session = await service.create({ userId, userAgent: CHROME_MAC, ipAddress: "203.0.113.7" });
    await waitOnExecutionContext(ctx);
    expect((await callWith({}, "POST", "/auth/logout", bearer(session.token))).status).toBe(200);
    const about = await d1("DB")
      .prepare("SELECT count(*) AS n FROM ssf_queued_sets WHERE claims LIKE ?")
      .bind(`%${userId}%`)
      .first();
    expect(about).toEqual({ n: 0 });
    const events = await d1(await bindingOfUser(userId))
      .prepare("SELECT type, pending_delivery FROM session_events WHERE user_id = ? ORDER BY id")
      .bind(userId)
      .all();
    expect(events.results).toEqual([
      { type: "created", pending_delivery: 0 },
      { type: "logout", pending_delivery: 0 },
    ]);
  });
});

describe("push delivery (RFC 8935)", () => {
  // A URL of its own per test: every push stream of the file's database gets the events.
  const push = () => {
    const url = `https://receiver.example/in/${crypto.randomUUID()}`;
    const delivery = { method: "urn:ietf:rfc:8935", endpoint_url: url, authorization_header: "Bearer push-secret" };
    return { url, stream: { delivery } };
  };

  it("POSTs each SET as application/secevent+jwt with the stream's Authorization, after the answer", async () => {
    const pushed: Request[] = [];
    const { url, stream } = push();
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      if (request.url === url) pushed.push(request);
      return new Response(null, { status: 202 });
    });
    const { vars, stream_id, login } = await setUp({}, stream);
    const session = await login(newUser());
    expect((await callWith(vars, "POST", "/auth/logout", bearer(session.token))).status).toBe(200);
    expect(pushed).toHaveLength(2);
    const keySet = (await (await callWith(vars, "GET", "/ssf/jwks.json")).json()) as JSONWebKeySet;
    for (const request of pushed) {
      expect(request.method).toBe("POST");
      expect(request.headers.get("Content-Type")).toBe("application/secevent+jwt");
      expect(request.headers.get("Accept")).toBe("application/json");
      expect(request.headers.get("Authorization")).toBe("Bearer push-secret");
      const { protectedHeader } = await compactVerify(await request.text(), createLocalJWKSet(keySet));
      expect(protectedHeader.typ).toBe("secevent+jwt");
    }
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("is not the answer's work: a sign-out whose SETs are queued, pushed and marked delivered after it writes no request log line", async () => {
    const pushed: string[] = [];
    const { url, stream } = push();
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      if (request.url === url) pushed.push(request.url);
      return new Response(null, { status: 202 });
    });
    const { vars, stream_id, login } = await setUp({}, stream);
    // On DB, where the SETs are queued: on another, a second database asked would hide the sending.
    const session = await login(await newUserOn("DB"));
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    expect((await callWith(vars, "POST", "/auth/logout", bearer(session.token))).status).toBe(200);
    // The answer made one round trip; the sending after it, three more, is not the answer's.
    expect(lines).toEqual([]);
    expect(pushed).toHaveLength(2);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("keeps a SET whose push failed, with the same jti, and pushes it again once due, by the minute cron", async () => {
    let answer = 503;
    const jtis: string[] = [];
    const { url, stream } = push();
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      if (request.url !== url) return new Response(null, { status: 202 });
      jtis.push(decodeJwt(await request.text()).jti as string);
      return new Response(null, { status: answer });
    });
    const { vars, stream_id } = await setUp({}, stream);
    const before = Date.now();
    const ctx = createExecutionContext();
    await new SessionService(ctx, { ...env, ...vars }).create({
      userId: newUser(),
      userAgent: CHROME_MAC,
      ipAddress: "203.0.113.7",
    });
    await waitOnExecutionContext(ctx);
    const row = await d1("DB")
      .prepare("SELECT jti, attempts, next_attempt_at FROM ssf_queued_sets WHERE stream_id = ?")
      .bind(stream_id)
      .first<{ jti: string; attempts: number; next_attempt_at: number }>();
    expect(row?.attempts).toBe(1);
    expect(row?.next_attempt_at).toBeGreaterThanOrEqual(before + 30_000);

    answer = 202;
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime((row?.next_attempt_at as number) + 1);
    await runCron("* * * * *", vars);
    expect(jtis).toEqual([row?.jti, row?.jti]);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("drops a SET the receiver refuses for good (4xx), logging the status only; a paused stream pushes nothing", async () => {
    const { url, stream } = push();
    const { as, stream_id, login } = await setUp({}, stream);
    const lines: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: string) => lines.push(line));
    const pushed: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
      const target = new Request(input).url;
      if (target === url) pushed.push(target);
      return target === url
        ? Response.json({ err: "invalid_audience", description: "who?" }, { status: 400 })
        : new Response(null, { status: 202 });
    });
    await login(newUser());
    expect(lines.map((line) => JSON.parse(line))).toContainEqual(
      expect.objectContaining({ event: "ssf_push_refused", stream: stream_id, status: 400 }),
    );
    expect(lines.join("\n")).not.toContain("who?");

    expect(pushed).toHaveLength(1);
    await as("POST", "/ssf/streams/status", { stream_id, status: "paused" });
    await login(newUser());
    expect(pushed).toHaveLength(1);
    expect(await waitingFor(stream_id)).toBe(1);
  });

  it("drops SETs older than SSF_SET_RETENTION_DAYS at the hourly purge, and the stream's status says so", async () => {
    const { stream } = push();
    vi.spyOn(globalThis, "fetch").mockResolvedValue(new Response(null, { status: 503 }));
    const { vars, as, stream_id, login } = await setUp({ SSF_SET_RETENTION_DAYS: "2" }, stream);
    await login(newUser());
    const lines: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: string) => lines.push(line));
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 2 * 86_400_000 + 1000);
    await runCron("17 * * * *", vars);
    expect(await waitingFor(stream_id)).toBe(0);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual({
      level: "warn",
      event: "ssf_sets_expired",
      stream: stream_id,
      dropped: 1,
    });
    const status = (await (await as("GET", `/ssf/streams/status?stream_id=${stream_id}`)).json()) as { reason: string };
    expect(status).toEqual({
      stream_id,
      status: "enabled",
      reason: expect.stringMatching(/^SETs older than the retention were dropped on \d{4}-/),
    });
  });

  it("an operator's command leaves its events to the minute cron, which queues their SETs", async () => {
    const { vars, login, poll } = await setUp();
    const session = await login(newUser());
    await poll();
    const shards = openShards({ ...env, ...vars } as Env);
    await endSession(scopeWith(shards, readConfig(env), LEFT_TO_THE_CRON), { sessionId: session.id, reason: "admin" });
    expect(
      (await poll()).filter((claims) => (claims.sub_id as { session: { id: string } }).session.id === session.id),
    ).toEqual([]);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 61_000);
    await runCron("* * * * *", vars);
    // The established SET, handed out but not acknowledged, comes again too: only the revocation is new.
    const revoked = (await poll()).filter(
      (claims) =>
        (claims.sub_id as { session: { id: string } }).session.id === session.id && eventOf(claims).type === REVOKED,
    );
    expect(revoked.map(eventOf)).toEqual([expect.objectContaining({ initiating_entity: "admin" })]);
  });
});

describe("overlapping push rounds", () => {
  const url = () => `https://receiver.example/slow/${crypto.randomUUID()}`;
  /** A push stream with one SET waiting, due now; the stream's own pushes are driven by the test. */
  async function oneWaiting() {
    const endpoint = url();
    const delivery = { method: "urn:ietf:rfc:8935", endpoint_url: endpoint };
    const { vars, as, stream_id, login } = await setUp({}, { delivery });
    // Paused, the login's SET is queued but not pushed after the answer. The SETs it queues for
    // the file's other push streams are pushed then: answered here, not looked up on the network
    // (one slow DNS answer among that many would outlast the test).
    await as("POST", "/ssf/streams/status", { stream_id, status: "paused" });
    const others = vi.spyOn(globalThis, "fetch").mockImplementation(async () => new Response(null, { status: 202 }));
    await login(newUser());
    others.mockRestore();
    await as("POST", "/ssf/streams/status", { stream_id, status: "enabled" });
    const signer = readTransmitter({ ...env, ...vars }) as Transmitter;
    const streams = openShards(env).streams().db;
    const row = await d1("DB")
      .prepare("SELECT jti, next_attempt_at FROM ssf_queued_sets WHERE stream_id = ?")
      .bind(stream_id)
      .first<{ jti: string; next_attempt_at: number }>();
    const at = (ms: number) => new Date((row?.next_attempt_at as number) + ms);
    return { vars, endpoint, stream_id, signer, streams, jti: row?.jti as string, at };
  }

  /** A receiver that answers `status` only when told to, recording each SET's jti as it arrives. */
  function slowReceiver(endpoint: string) {
    const arrived: string[] = [];
    let answer: (status: number) => void = () => {};
    const answered = new Promise<number>((resolve) => {
      answer = resolve;
    });
    const send: typeof fetch = async (input, init) => {
      const request = new Request(input, init);
      if (request.url !== endpoint) return new Response(null, { status: 202 });
      arrived.push(decodeJwt(await request.text()).jti as string);
      return new Response(null, { status: await answered });
    };
    return { arrived, answer, send };
  }

  /** The SET's row: its attempts, when it is next due and which round holds it (undefined once forgotten). */
  const rowOf = async (streamId: string, jti: string) =>
    (await d1("DB")
      .prepare("SELECT attempts, next_attempt_at, leased_by FROM ssf_queued_sets WHERE stream_id = ? AND jti = ?")
      .bind(streamId, jti)
      .first<{ attempts: number; next_attempt_at: number; leased_by: string | null }>()) ?? undefined;

  /**
   * Round A claims the waiting SET and its receiver does not answer; A's lease runs out and
   * round B claims and sends the SET. Both receivers still wait: each test answers them.
   */
  async function lateRound() {
    const waiting = await oneWaiting();
    const { endpoint, stream_id, signer, streams, jti, at } = waiting;
    const late = slowReceiver(endpoint);
    const first = pushDue(streams, signer, at(0), late.send);
    await vi.waitFor(() => expect(late.arrived).toEqual([jti]));
    const held = await rowOf(stream_id, jti);
    const next = slowReceiver(endpoint);
    const second = pushDue(streams, signer, at(PUSH_LEASE_MS), next.send);
    await vi.waitFor(() => expect(next.arrived).toEqual([jti]));
    const leased = await rowOf(stream_id, jti);
    expect(leased).toEqual({
      attempts: 0,
      next_attempt_at: at(2 * PUSH_LEASE_MS).getTime(),
      leased_by: expect.any(String),
    });
    expect(leased?.leased_by).not.toBe(held?.leased_by);
    return { ...waiting, late, first, next, second, leased };
  }

  it("a round that starts while another holds a SET sends nothing; the SET answered 2xx is never pushed again", async () => {
    const { endpoint, stream_id, signer, streams, jti, at } = await oneWaiting();
    const slow = slowReceiver(endpoint);
    const first = pushDue(streams, signer, at(0), slow.send);
    await vi.waitFor(() => expect(slow.arrived).toEqual([jti]));
    // 5 s later, while the first round still waits for the receiver's answer.
    await pushDue(streams, signer, at(5_000), slow.send);
    expect(slow.arrived).toEqual([jti]);
    slow.answer(202);
    await first;
    expect(await waitingFor(stream_id)).toBe(0);
    await pushDue(streams, signer, at(120_000), slow.send);
    expect(slow.arrived).toEqual([jti]);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("a failing receiver is retried after the backoff, counted from its answer, not by the rounds meanwhile", async () => {
    const { endpoint, stream_id, signer, streams, jti, at } = await oneWaiting();
    const slow = slowReceiver(endpoint);
    const first = pushDue(streams, signer, at(0), slow.send);
    await vi.waitFor(() => expect(slow.arrived).toEqual([jti]));
    await pushDue(streams, signer, at(5_000), slow.send);
    expect(slow.arrived).toEqual([jti]);
    slow.answer(503);
    await first;
    const { next_attempt_at, attempts } = (await rowOf(stream_id, jti)) as {
      attempts: number;
      next_attempt_at: number;
    };
    expect(attempts).toBe(1);
    expect(next_attempt_at).toBeGreaterThanOrEqual(at(30_000).getTime());
    await pushDue(streams, signer, at(29_000), slow.send);
    expect(slow.arrived).toEqual([jti]);
    // Due once the 30 s have passed: sent again (the receiver still says 503), and put off twice as long.
    await pushDue(streams, signer, new Date(next_attempt_at), slow.send);
    expect(slow.arrived).toEqual([jti, jti]);
    const again = await rowOf(stream_id, jti);
    expect(again?.attempts).toBe(2);
    expect(again?.next_attempt_at).toBeGreaterThanOrEqual(next_attempt_at + 60_000);
  });

  it("a SET that cannot be signed (a broken key, a bug) fails its round: nothing sent, not put off as a receiver's failure, pushed by the round after the lease", async () => {
    const { endpoint, stream_id, signer, streams, jti, at } = await oneWaiting();
    const receiver = slowReceiver(endpoint);
    receiver.answer(202);
    // The public half only: importing it to sign throws, as a bug under the signing would.
    const broken = { ...signer, signer: { ...signer.signer, d: undefined } };
    await expect(pushDue(streams, broken, at(0), receiver.send)).rejects.toThrow();
    expect(receiver.arrived).toEqual([]);
    // Held by the failed round's claim until its lease ends: no attempt counted, no backoff.
    expect(await rowOf(stream_id, jti)).toEqual({
      attempts: 0,
      next_attempt_at: at(PUSH_LEASE_MS).getTime(),
      leased_by: expect.any(String),
    });
    await pushDue(streams, signer, at(PUSH_LEASE_MS), receiver.send);
    expect(receiver.arrived).toEqual([jti]);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("a push the network fails is retried after the backoff, with a warn line naming the error and nothing of its message", async () => {
    const { stream_id, signer, streams, jti, at } = await oneWaiting();
    const lines: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: string) => void lines.push(line));
    const unreachable: typeof fetch = async () => {
      throw new TypeError("connect failed: https://user:secret@receiver.example/");
    };
    expect(await pushDue(streams, signer, at(0), unreachable)).toEqual({ delivered: 0, refused: 0, retried: 1 });
    expect(lines).toEqual([
      `{"level":"warn","event":"ssf_push_failed","stream":"${stream_id}","jti":"${jti}","name":"TypeError"}`,
    ]);
    const { attempts, next_attempt_at } = (await rowOf(stream_id, jti)) as {
      attempts: number;
      next_attempt_at: number;
    };
    expect(attempts).toBe(1);
    expect(next_attempt_at).toBeGreaterThanOrEqual(at(30_000).getTime());
  });

  it("a stored Authorization no header may carry fails the round, by the cron, with its log line: nothing sent, not put off as a receiver's failure", async () => {
    const { vars, endpoint, stream_id, jti, at } = await oneWaiting();
    const setHeader = (value: string | null) =>
      d1("DB").prepare("UPDATE ssf_streams SET authorization_header = ? WHERE id = ?").bind(value, stream_id).run();
    await setHeader("Bearer s3cr3t\nInjected: two");
    try {
      const sent: string[] = [];
      vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
        sent.push(new Request(input, init).url);
        return new Response(null, { status: 202 });
      });
      const errors: string[] = [];
      vi.spyOn(console, "error").mockImplementation((line: string) => void errors.push(line));
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(at(0));
      await expect(runCron("* * * * *", vars)).rejects.toThrow(TypeError);
      expect(sent).not.toContain(endpoint);
      expect(errors.map((line) => JSON.parse(line))).toEqual([
        expect.objectContaining({ level: "error", event: "unhandled_error", name: "TypeError", cron: "delivery" }),
      ]);
      expect(errors.join("\n")).not.toContain("s3cr3t");
      expect(await rowOf(stream_id, jti)).toEqual({
        attempts: 0,
        next_attempt_at: at(PUSH_LEASE_MS).getTime(),
        leased_by: expect.any(String),
      });
    } finally {
      // The file's later rounds push to every push stream of its database: this one included.
      await setHeader(null);
    }
  });

  it("two rounds started at the same moment push a SET once", async () => {
    const { endpoint, stream_id, signer, streams, jti, at } = await oneWaiting();
    const receiver = slowReceiver(endpoint);
    receiver.answer(202);
    await Promise.all([pushDue(streams, signer, at(0), receiver.send), pushDue(streams, signer, at(0), receiver.send)]);
    expect(receiver.arrived).toEqual([jti]);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("a round that dies between the push and its record leaves the SET to the round after its lease: sent again, never lost", async () => {
    const { endpoint, stream_id, signer, jti, at } = await oneWaiting();
    const receiver = slowReceiver(endpoint);
    receiver.answer(202);
    // The streams' database fails the round's second call, its record, as an isolate gone would leave it.
    let calls = 0;
    const dying = openShards({
      ...env,
      DB: wrapD1(d1("DB"), (call) => {
        calls++;
        return calls === 2 ? Promise.reject(new Error("isolate gone")) : call();
      }),
    }).streams().db;
    await expect(pushDue(dying, signer, at(0), receiver.send)).rejects.toThrow("isolate gone");
    expect(receiver.arrived).toEqual([jti]);
    const streams = openShards(env).streams().db;
    await pushDue(streams, signer, at(5_000), receiver.send);
    expect(receiver.arrived).toEqual([jti]);
    expect(await waitingFor(stream_id)).toBe(1);
    await pushDue(streams, signer, at(PUSH_LEASE_MS), receiver.send);
    expect(receiver.arrived).toEqual([jti, jti]);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("a round whose lease ran out records nothing: its late 2xx leaves the SET to the round that holds it, whose 503 then puts it off", async () => {
    const { endpoint, stream_id, signer, streams, jti, at, late, first, next, second, leased } = await lateRound();
    // The first round's receiver answers 202 late: the SET the second round delivers is not forgotten.
    late.answer(202);
    await first;
    expect(await rowOf(stream_id, jti)).toEqual(leased);
    // The second round's receiver answers 503: its backoff decides, counted from its answer.
    next.answer(503);
    await second;
    const putOff = await rowOf(stream_id, jti);
    expect(putOff).toEqual({ attempts: 1, next_attempt_at: expect.any(Number), leased_by: null });
    expect(putOff?.next_attempt_at).toBeGreaterThanOrEqual(at(PUSH_LEASE_MS + 30_000).getTime());
    const after = slowReceiver(endpoint);
    after.answer(202);
    await pushDue(streams, signer, at(PUSH_LEASE_MS + 29_000), after.send);
    expect(after.arrived).toEqual([]);
    await pushDue(streams, signer, new Date(putOff?.next_attempt_at as number), after.send);
    expect(after.arrived).toEqual([jti]);
    expect(await waitingFor(stream_id)).toBe(0);
  });

  it("a round whose lease ran out records nothing: its late 503 neither puts back nor reschedules the SET another round is delivering", async () => {
    const { endpoint, stream_id, signer, streams, jti, at, late, first, next, second, leased } = await lateRound();
    // The first round's receiver answers 503 late: the SET stays the second round's, due when its lease ends.
    late.answer(503);
    await first;
    expect(await rowOf(stream_id, jti)).toEqual(leased);
    // So a round while the second still waits (past the first's 30 s backoff) sends nothing: not a third time.
    const third = slowReceiver(endpoint);
    third.answer(202);
    await pushDue(streams, signer, at(PUSH_LEASE_MS + 5_000), third.send);
    expect(third.arrived).toEqual([]);
    // The second round's 202 forgets the SET: never pushed again.
    next.answer(202);
    await second;
    expect(await waitingFor(stream_id)).toBe(0);
    await pushDue(streams, signer, at(3 * PUSH_LEASE_MS), third.send);
    expect(third.arrived).toEqual([]);
    expect([...late.arrived, ...next.arrived]).toEqual([jti, jti]);
  });
});
