import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { decodeJwt, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ReauthenticateRequest, SessionService } from "../src/rpc/session-service.ts";
import {
  bearer,
  CHROME_MAC,
  callWith,
  d1OfUser,
  expectError,
  FIREFOX_LINUX,
  type Issued,
  issue,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
} from "./helpers.ts";
import { newReceiver, ssfCall, transmitter } from "./ssf.ts";

// The CAEP 1.0 events an upstream pushes to POST /ssf/inbound, each acted on as its `events`
// in SSF_UPSTREAMS says: a hold asks the user to sign in again at the provider (re-establish,
// not end; IPSIE SL2), an ending ends, a log only logs. The provider names users by its own
// subjects, as CAEP has it (`sub-<user>` here, what its sign-ins gave `create`). Signed here with `jose`.

const ISSUER = "https://idp.example";
const AUDIENCE = "https://sessions.example/ssf";
const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";
const STEP_UP =
  'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';

const es256 = await generateKeyPair("ES256", { extractable: true });
const KEYS = [{ ...(await exportJWK(es256.publicKey)), kid: "es1", alg: "ES256", use: "sig" }];

type UpstreamConfig = Record<string, unknown>;
const upstream = (overrides: UpstreamConfig = {}): UpstreamConfig => ({
  issuer: ISSUER,
  name: "idp",
  audience: AUDIENCE,
  subject: "iss_sub",
  jwks: { keys: KEYS },
  ...overrides,
});
const OTHER = { ...upstream({ issuer: "https://other.example", name: "other" }) };
const vars = (overrides: UpstreamConfig = {}): Partial<Env> => ({
  SSF_UPSTREAMS: JSON.stringify([upstream(overrides), OTHER]),
});
const DEFAULTS = vars();
const now = () => Math.floor(Date.now() / 1000);

const service = (bindings: Partial<Env> = DEFAULTS) =>
  new SessionService(createExecutionContext(), { ...env, ...bindings });

/** The provider's own subject for a user here: what its sign-ins give `create`, and its SETs name. */
const subjectOf = (userId: string) => `sub-${userId}`;

/** A session signed in through `provider`, as a login flow does after the provider's callback. */
async function signIn(userId: string, sid: string | null = null, provider = "idp"): Promise<Issued> {
  return service().create({ userId, userAgent: CHROME_MAC, upstream: { provider, subject: subjectOf(userId), sid } });
}

/** The provider's fresh sign-in for the session, as the login flow passes it to `reauthenticate`. */
const freshSignIn = (userId: string, authTime: number | undefined, sid?: string) => ({
  provider: "idp",
  subject: subjectOf(userId),
  ...(authTime === undefined ? {} : { auth_time: authTime }),
  ...(sid === undefined ? {} : { sid }),
});

/** A user with a session signed in through the upstream and one signed in here (a password). */
async function userWithTwo() {
  const user = newUser();
  return { user, federated: await signIn(user), local: await issue(user) };
}

/** A SET about `userId`, named by the provider's own subject. */
function set(userId: string, event: string, body: Record<string, unknown> = {}, overrides: JWTPayload = {}) {
  const claims = {
    iss: ISSUER,
    aud: AUDIENCE,
    iat: now(),
    jti: crypto.randomUUID(),
    sub_id: { format: "iss_sub", iss: ISSUER, sub: subjectOf(userId) },
    events: { [`${CAEP}${event}`]: { event_timestamp: now(), ...body } },
    ...overrides,
  };
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "ES256", typ: "secevent+jwt", kid: "es1" })
    .sign(es256.privateKey);
}

async function push(body: string, bindings: Partial<Env> = DEFAULTS): Promise<void> {
  const response = await callWith(
    bindings,
    "POST",
    "/ssf/inbound",
    { "Content-Type": "application/secevent+jwt" },
    body,
  );
  expect({ status: response.status, body: await response.text() }).toEqual({ status: 202, body: "" });
}

const whoami = (token: string) => callWith({}, "GET", "/auth/whoami", bearer(token));

/** What the next use of a session meets: `live`, `held` (the RFC 9470 challenge) or `ended`. */
async function stateOf(session: Issued): Promise<"live" | "held" | "ended"> {
  const response = await whoami(session.token);
  if (response.status === 200) return "live";
  if (response.headers.get("WWW-Authenticate") === STEP_UP) {
    await expectError(response, 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    return "held";
  }
  await expectError(response, 401, "invalid_token", { wwwAuthenticate: REJECTED_CHALLENGE });
  return "ended";
}

/** The user's events other than sign-ins, oldest first. */
async function eventsOf(userId: string) {
  const { results } = await (await d1OfUser(userId))
    .prepare(
      "SELECT session_id, type, reason, actor_session_id FROM session_events WHERE user_id = ? AND type != 'created' ORDER BY id",
    )
    .bind(userId)
    .all<{ session_id: string; type: string; reason: string; actor_session_id: string | null }>();
  return results;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the default action of each CAEP 1.0 event", () => {
  // [event, its payload, what becomes of the session signed in through the upstream, of the one signed in here, the event logged]
  const CASES: [string, Record<string, unknown>, string, string, string | null][] = [
    ["session-revoked", {}, "ended", "ended", "ended_by_upstream"],
    ["credential-change", { credential_type: "password", change_type: "update" }, "held", "live", "held_by_upstream"],
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "nist-aal1", previous_level: "nist-aal2", change_direction: "decrease" },
      "held",
      "live",
      "held_by_upstream",
    ],
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "nist-aal2", previous_level: "nist-aal1", change_direction: "increase" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    // Without change_direction, its levels compared.
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "nist-aal1", previous_level: "nist-aal2" },
      "held",
      "live",
      "held_by_upstream",
    ],
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "NIST-AAL2", previous_level: "nist-aal3" },
      "held",
      "live",
      "held_by_upstream",
    ],
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "nist-aal3", previous_level: "nist-aal2" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "nist-aal2", previous_level: "nist-aal2" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    [
      "assurance-level-change",
      { namespace: "RFC8176", current_level: "pwd", previous_level: "mfa" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    [
      "assurance-level-change",
      { namespace: "NIST-AAL", current_level: "nist-aal2" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    [
      "device-compliance-change",
      { previous_status: "compliant", current_status: "not-compliant" },
      "held",
      "live",
      "held_by_upstream",
    ],
    [
      "device-compliance-change",
      { previous_status: "not-compliant", current_status: "compliant" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    [
      "risk-level-change",
      { principal: "USER", current_level: "HIGH", previous_level: "LOW" },
      "held",
      "live",
      "held_by_upstream",
    ],
    ["risk-level-change", { principal: "USER", current_level: "high" }, "held", "live", "held_by_upstream"],
    [
      "risk-level-change",
      { principal: "USER", current_level: "MEDIUM", previous_level: "HIGH" },
      "live",
      "live",
      "signaled_by_upstream",
    ],
    ["token-claims-change", { claims: { role: "reader" } }, "live", "live", "signaled_by_upstream"],
    ["session-established", {}, "live", "live", null],
    ["session-presented", {}, "live", "live", null],
  ];
  for (const [event, body, federated, local, logged] of CASES) {
    it(`${event} ${JSON.stringify(body)}: the upstream's session ${federated}, the local one ${local}, ${logged ?? "nothing"} logged`, async () => {
      const user = newUser();
      const sessions = { federated: await signIn(user), local: await issue(user) };
      await push(await set(user, event, body));
      expect({ federated: await stateOf(sessions.federated), local: await stateOf(sessions.local) }).toEqual({
        federated,
        local,
      });
      // An ending reaches every session of the user; a hold or a log, those signed in through the upstream.
      const reached =
        logged === null
          ? []
          : logged === "ended_by_upstream"
            ? [sessions.federated, sessions.local]
            : [sessions.federated];
      expect((await eventsOf(user)).sort((a, b) => a.session_id.localeCompare(b.session_id))).toEqual(
        reached
          .map((session) => ({ session_id: session.id, type: logged, reason: `idp:${event}`, actor_session_id: null }))
          .sort((a, b) => a.session_id.localeCompare(b.session_id)),
      );
    });
  }
});

describe("each action, as the upstream's events choose", () => {
  // The payload that makes each event a change for the worse, where it has a direction.
  const WORSE: Record<string, Record<string, unknown>> = {
    "session-revoked": {},
    "token-claims-change": { claims: { role: "reader" } },
    "credential-change": { credential_type: "password", change_type: "revoke" },
    "assurance-level-change": { namespace: "NIST-AAL", current_level: "nist-aal1", change_direction: "decrease" },
    "device-compliance-change": { previous_status: "compliant", current_status: "not-compliant" },
    "session-established": {},
    "session-presented": {},
    "risk-level-change": { principal: "USER", current_level: "HIGH" },
  };
  const OUTCOMES = {
    hold: { federated: "held", local: "live", logged: "held_by_upstream" },
    end: { federated: "ended", local: "ended", logged: "ended_by_upstream" },
    log: { federated: "live", local: "live", logged: "signaled_by_upstream" },
    ignore: { federated: "live", local: "live", logged: null },
  } as const;
  for (const [event, body] of Object.entries(WORSE)) {
    it(`${event}: hold, end, log and ignore each do what they say`, async () => {
      for (const [action, outcome] of Object.entries(OUTCOMES)) {
        const { user, federated, local } = await userWithTwo();
        await push(await set(user, event, body), vars({ events: { [event]: action } }));
        expect({ action, federated: await stateOf(federated), local: await stateOf(local) }).toEqual({
          action,
          federated: outcome.federated,
          local: outcome.local,
        });
        const types = (await eventsOf(user)).map((logged) => [logged.type, logged.reason]);
        const expected = outcome.logged === null ? 0 : outcome.logged === "ended_by_upstream" ? 2 : 1;
        expect(types).toEqual(Array(expected).fill([outcome.logged, `idp:${event}`]));
      }
    });
  }

  it("a change no worse is only logged, whatever the action; ignore ignores it too", async () => {
    const better = { namespace: "NIST-AAL", current_level: "nist-aal2", change_direction: "increase" };
    for (const [action, logged] of [
      ["end", ["signaled_by_upstream"]],
      ["hold", ["signaled_by_upstream"]],
      ["ignore", []],
    ] as const) {
      const { user, federated, local } = await userWithTwo();
      await push(
        await set(user, "assurance-level-change", better),
        vars({ events: { "assurance-level-change": action } }),
      );
      expect([await stateOf(federated), await stateOf(local)]).toEqual(["live", "live"]);
      expect((await eventsOf(user)).map((event) => event.type)).toEqual(logged);
    }
  });

  it("a level change without change_direction is compared through the upstream's acr_levels", async () => {
    const levels = vars({ acr_levels: { "urn:idp:mfa": 2, "urn:idp:pwd": 1, "urn:idp:phr": 3 } });
    for (const [current, previous, after] of [
      ["urn:idp:pwd", "urn:idp:mfa", "held"],
      ["urn:idp:mfa", "urn:idp:phr", "held"],
      ["urn:idp:phr", "urn:idp:pwd", "live"],
      ["urn:idp:pwd", "urn:idp:unknown", "live"],
      ["toString", "urn:idp:mfa", "live"],
    ] as const) {
      const { user, federated } = await userWithTwo();
      const body = { namespace: "urn:idp", current_level: current, previous_level: previous };
      await push(await set(user, "assurance-level-change", body), levels);
      expect({ current, previous, state: await stateOf(federated) }).toEqual({ current, previous, state: after });
      expect((await eventsOf(user)).map((event) => event.type)).toEqual([
        after === "held" ? "held_by_upstream" : "signaled_by_upstream",
      ]);
    }
  });

  it("events not named keep their defaults", async () => {
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change"), vars({ events: { "token-claims-change": "end" } }));
    expect(await stateOf(federated)).toBe("held");
  });
});

describe("a hold", () => {
  it("refuses every use but a sign-out with the RFC 9470 challenge; the provider's sign-in after it lifts it and logs hold", async () => {
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change", { event_timestamp: now() - 60 }));
    expect(await stateOf(federated)).toBe("held");
    await expectError(
      await callWith({}, "GET", "/auth/sessions", bearer(federated.token)),
      401,
      "reauthentication_required",
      {
        wwwAuthenticate: STEP_UP,
      },
    );
    // The RPC says so to a login flow, which sends the user to the provider.
    expect(await service().authenticate(federated.token)).toMatchObject({
      sessionId: federated.id,
      reauthenticationRequired: true,
    });
    // After the provider's fresh sign-in, the login flow re-authenticates the session.
    const reissued = await service().reauthenticate({ token: federated.token, upstream: freshSignIn(user, now()) });
    expect(reissued?.sessionId).toBe(federated.id);
    expect(await stateOf(federated)).toBe("ended");
    expect(await stateOf({ ...federated, token: reissued?.token as string })).toBe("live");
    expect((await eventsOf(user)).map(({ type, reason }) => ({ type, reason }))).toEqual([
      { type: "held_by_upstream", reason: "idp:credential-change" },
      { type: "reauthenticated", reason: "hold" },
    ]);
  });

  it("is lifted by a reauthenticate that carries the provider's fresh sign-in: its factors, its sid", async () => {
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change", { event_timestamp: now() - 5 }));
    expect(await stateOf(federated)).toBe("held");
    const upstream = { ...freshSignIn(user, now(), "sid-after"), amr: ["pwd", "otp"] };
    const reissued = await service().reauthenticate({ token: federated.token, upstream });
    const token = reissued?.token as string;
    expect(await stateOf({ ...federated, token })).toBe("live");
    expect(await (await whoami(token)).json()).toMatchObject({
      amr: ["pwd", "otp"],
      upstream: { provider: "idp", subject: subjectOf(user), sid: "sid-after" },
    });
    expect((await eventsOf(user)).map(({ type, reason }) => ({ type, reason }))).toEqual([
      { type: "held_by_upstream", reason: "idp:credential-change" },
      { type: "reauthenticated", reason: "hold" },
    ]);
  });

  it("is not lifted by a local re-authentication, nor by the provider's sign-in before the event or without auth_time", async () => {
    const { user, federated } = await userWithTwo();
    const eventAt = now() - 30;
    await push(await set(user, "credential-change", { event_timestamp: eventAt }));
    const inputs: Omit<ReauthenticateRequest, "token">[] = [
      { factors: ["pwd", "otp"] },
      { upstream: freshSignIn(user, eventAt - 5) },
      { upstream: freshSignIn(user, eventAt) },
      { upstream: { ...freshSignIn(user, undefined), amr: ["pwd"] } },
    ];
    for (const input of inputs) {
      await expect(service().reauthenticate({ token: federated.token, ...input })).rejects.toThrow(
        new RangeError(
          "the session's identity provider holds it: only upstream, the provider's sign-in with an auth_time after its event, lifts the hold",
        ),
      );
      expect(await stateOf(federated)).toBe("held");
    }
    // Nothing was written by the refusals: the hold is all the log has.
    expect((await eventsOf(user)).map(({ type }) => type)).toEqual(["held_by_upstream"]);
    const reissued = await service().reauthenticate({
      token: federated.token,
      upstream: freshSignIn(user, eventAt + 1),
    });
    expect(await stateOf({ ...federated, token: reissued?.token as string })).toBe("live");
  });

  it("an event without event_timestamp holds from when it was received: only a sign-in after that lifts it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const receivedAt = now();
    vi.setSystemTime(receivedAt * 1000);
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change", {}, { events: { [`${CAEP}credential-change`]: {} } }));
    vi.setSystemTime((receivedAt + 10) * 1000);
    await expect(
      service().reauthenticate({ token: federated.token, upstream: freshSignIn(user, receivedAt - 1) }),
    ).rejects.toThrow(RangeError);
    expect(await stateOf(federated)).toBe("held");
    const reissued = await service().reauthenticate({
      token: federated.token,
      upstream: freshSignIn(user, receivedAt + 1),
    });
    expect(await stateOf({ ...federated, token: reissued?.token as string })).toBe("live");
  });

  it("a later hold moves the instant, an earlier one arriving after it does not: a sign-in between the two does not lift it", async () => {
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change", { event_timestamp: now() - 40 }));
    await push(await set(user, "credential-change", { event_timestamp: now() - 10 }));
    await push(await set(user, "credential-change", { event_timestamp: now() - 30 }));
    await expect(
      service().reauthenticate({ token: federated.token, upstream: freshSignIn(user, now() - 20) }),
    ).rejects.toThrow(RangeError);
    const reissued = await service().reauthenticate({ token: federated.token, upstream: freshSignIn(user, now()) });
    expect(await stateOf({ ...federated, token: reissued?.token as string })).toBe("live");
  });

  it("a context hold on a session its provider does not hold is lifted by any re-authentication, as before", async () => {
    const user = newUser();
    const federated = await service().create({
      userId: user,
      userAgent: CHROME_MAC,
      carrier: "both",
      upstream: { provider: "idp", subject: subjectOf(user), sid: null },
    });
    const held = { SESSION_CONTEXT_DEVICE: "hold" } as Partial<Env>;
    const cookieUse = await callWith(held, "GET", "/auth/whoami", {
      ...sessionCookie(federated.token),
      "User-Agent": FIREFOX_LINUX,
    });
    await expectError(cookieUse, 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    const reissued = await service().reauthenticate({ token: federated.token, factors: ["pwd"] });
    expect(await stateOf({ ...federated, token: reissued?.token as string })).toBe("live");
  });

  it("a re-authentication without sid keeps the stored one, which a sign-out sent back names", async () => {
    const user = newUser();
    const session = await signIn(user, "sid-kept");
    await push(await set(user, "credential-change", { event_timestamp: now() - 5 }));
    const reissued = await service().reauthenticate({ token: session.token, upstream: freshSignIn(user, now()) });
    const token = reissued?.token as string;
    expect(await (await whoami(token)).json()).toMatchObject({
      upstream: { provider: "idp", subject: subjectOf(user), sid: "sid-kept" },
    });
    const again = await service().reauthenticate({
      token,
      upstream: freshSignIn(user, now(), "sid-new"),
    });
    expect(await (await whoami(again?.token as string)).json()).toMatchObject({
      upstream: { provider: "idp", subject: subjectOf(user), sid: "sid-new" },
    });
  });

  it("a sign-out is not held back", async () => {
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change"));
    const response = await callWith({}, "POST", "/auth/logout", bearer(federated.token));
    expect(response.status).toBe(200);
    expect(await stateOf(federated)).toBe("ended");
  });

  it("reaches only the sessions signed in through that upstream, not another's", async () => {
    const user = newUser();
    const [mine, others] = [await signIn(user), await signIn(user, null, "other")];
    await push(await set(user, "credential-change"));
    expect([await stateOf(mine), await stateOf(others)]).toEqual(["held", "live"]);
  });
});

describe("what this service's own receivers are sent", () => {
  it("a hold goes out as risk-level-change HIGH by the system, naming the upstream's event; a log, as nothing", async () => {
    const { vars: transmitting } = await transmitter();
    const receiver = await newReceiver("https://downstream.example");
    const created = await ssfCall(transmitting, receiver.credential, "POST", "/ssf/streams", {});
    const { stream_id } = (await created.json()) as { stream_id: string };
    const { user, federated } = await userWithTwo();
    await push(await set(user, "credential-change"), { ...DEFAULTS, ...transmitting });
    await push(await set(user, "token-claims-change"), { ...DEFAULTS, ...transmitting });
    const polled = await ssfCall(transmitting, receiver.credential, "POST", `/ssf/streams/poll/${stream_id}`, {
      returnImmediately: true,
    });
    const { sets } = (await polled.json()) as { sets: Record<string, string> };
    const about = Object.values(sets)
      .map((sent) => decodeJwt(sent))
      .filter((sent) => JSON.stringify(sent.sub_id).includes(federated.id));
    expect(about.map((sent) => sent.events)).toEqual([
      {
        [`${CAEP}risk-level-change`]: {
          event_timestamp: expect.any(Number),
          initiating_entity: "system",
          principal: "SESSION",
          current_level: "HIGH",
          risk_reason: "The identity provider asked (idp:credential-change)",
        },
      },
    ]);
  });
});

describe("whose subject it names", () => {
  it("the provider's own subject, through the link its sign-in wrote: this service's user id names no one", async () => {
    const { user, federated, local } = await userWithTwo();
    const byUserId = await set(user, "session-revoked", {}, { sub_id: { format: "iss_sub", iss: ISSUER, sub: user } });
    await push(byUserId);
    expect([await stateOf(federated), await stateOf(local)]).toEqual(["live", "live"]);
    await push(await set(user, "session-revoked"));
    expect([await stateOf(federated), await stateOf(local)]).toEqual(["ended", "ended"]);
  });

  it("an opaque subject is the provider's own too", async () => {
    const { user, federated } = await userWithTwo();
    const opaque = { sub_id: { format: "opaque", id: subjectOf(user) } };
    await push(await set(user, "credential-change", {}, opaque), vars({ subject: "opaque" }));
    expect(await stateOf(federated)).toBe("held");
  });

  it("with subjects_are_user_ids, this service's user ids as before, and the provider's subject names no one", async () => {
    const asUserIds = vars({ subjects_are_user_ids: true });
    const { user, federated, local } = await userWithTwo();
    await push(await set(user, "credential-change"), asUserIds);
    expect(await stateOf(federated)).toBe("live");
    const byUserId = { sub_id: { format: "iss_sub", iss: ISSUER, sub: user } };
    await push(await set(user, "credential-change", {}, byUserId), asUserIds);
    expect([await stateOf(federated), await stateOf(local)]).toEqual(["held", "live"]);
  });

  it("a subject that is no subject this service holds, or no user id it can hold, is refused", async () => {
    const { user, federated } = await userWithTwo();
    for (const [bindings, sub, description] of [
      [DEFAULTS, "x".repeat(256), "The subject is not a subject this service holds."],
      [
        vars({ subjects_are_user_ids: true }),
        "not a user\u0000id",
        "The subject's user id is not one this service can hold.",
      ],
    ] as const) {
      const response = await callWith(
        bindings,
        "POST",
        "/ssf/inbound",
        { "Content-Type": "application/secevent+jwt" },
        await set(user, "session-revoked", {}, { sub_id: { format: "iss_sub", iss: ISSUER, sub } }),
      );
      expect({ status: response.status, body: await response.json() }).toEqual({
        status: 400,
        body: { err: "invalid_request", description },
      });
    }
    expect(await stateOf(federated)).toBe("live");
  });

  it("a SET about a subject no sign-in linked yet acts on no one, even sent again once a sign-in links it", async () => {
    const user = newUser();
    const sent = await set(user, "session-revoked");
    await push(sent);
    const session = await signIn(user);
    await push(sent);
    expect(await stateOf(session)).toBe("live");
    expect(await eventsOf(user)).toEqual([]);
    // The memory is of that SET alone: the provider's next one acts.
    await push(await set(user, "credential-change"));
    expect(await stateOf(session)).toBe("held");
  });

  it("another upstream's SET naming the same subject string reaches nothing: links are per upstream", async () => {
    const { user, federated, local } = await userWithTwo();
    const other = "https://other.example";
    const sent = await set(
      user,
      "session-revoked",
      {},
      {
        iss: other,
        sub_id: { format: "iss_sub", iss: other, sub: subjectOf(user) },
      },
    );
    await push(sent);
    expect([await stateOf(federated), await stateOf(local)]).toEqual(["live", "live"]);
    expect(await eventsOf(user)).toEqual([]);
  });

  it("a session signed in after the SET was issued is not one it speaks of", async () => {
    const user = newUser();
    const issuedAt = now() - 600;
    const sent = await set(user, "session-revoked", {}, { iat: issuedAt });
    const later = await signIn(user);
    await push(sent);
    expect(await stateOf(later)).toBe("live");
  });

  it("a subject linked anew reaches the user its last sign-in linked it to", async () => {
    const [first, second] = [newUser(), newUser()];
    const subject = { provider: "idp", subject: "sub-shared", sid: null };
    await service().create({ userId: first, userAgent: CHROME_MAC, upstream: subject });
    const linked = await service().create({ userId: second, userAgent: CHROME_MAC, upstream: subject });
    await push(
      await set(second, "credential-change", {}, { sub_id: { format: "iss_sub", iss: ISSUER, sub: "sub-shared" } }),
    );
    expect(await stateOf(linked)).toBe("held");
    expect((await eventsOf(first)).map(({ type, reason }) => [type, reason])).toEqual([["ended", "upstream_relinked"]]);
  });
});

describe("which sessions an event reaches", () => {
  const complex = (userId: string | null, sessionId: string) => ({
    format: "complex",
    ...(userId === null ? {} : { user: { format: "iss_sub", iss: ISSUER, sub: subjectOf(userId) } }),
    session: { format: "opaque", id: sessionId },
  });

  it("a complex subject's session acts on that session alone", async () => {
    const user = newUser();
    const [named, other] = [await signIn(user, "sid-1"), await signIn(user, "sid-2")];
    await push(await set(user, "credential-change", {}, { sub_id: complex(user, named.id) }));
    expect([await stateOf(named), await stateOf(other)]).toEqual(["held", "live"]);
    await push(await set(user, "token-claims-change", {}, { sub_id: complex(null, other.id) }));
    expect((await eventsOf(user)).map(({ session_id, type }) => [session_id, type])).toEqual([
      [named.id, "held_by_upstream"],
      [other.id, "signaled_by_upstream"],
    ]);
  });

  it("a session named by the upstream's own sid: each action reaches that session alone", async () => {
    for (const [event, after, logged] of [
      ["credential-change", "held", "held_by_upstream"],
      ["token-claims-change", "live", "signaled_by_upstream"],
      ["session-revoked", "ended", "ended_by_upstream"],
    ] as const) {
      const { user, federated, local } = await userWithTwo();
      const named = await signIn(user, "idp-sid-7");
      await push(await set(user, event, {}, { sub_id: complex(user, "idp-sid-7") }));
      expect([await stateOf(named), await stateOf(federated), await stateOf(local)]).toEqual([after, "live", "live"]);
      expect(await eventsOf(user)).toEqual([
        { session_id: named.id, type: logged, reason: `idp:${event}`, actor_session_id: null },
      ]);
    }
  });

  it("another upstream's sid, or a sid no session has, reaches nothing", async () => {
    for (const event of ["credential-change", "session-revoked"]) {
      const user = newUser();
      const [mine, others] = [await signIn(user, "sid-1"), await signIn(user, "sid-2", "other")];
      const local = await issue(user);
      for (const sid of ["sid-2", "sid-unknown"])
        await push(await set(user, event, {}, { sub_id: complex(user, sid) }));
      expect([await stateOf(mine), await stateOf(others), await stateOf(local)]).toEqual(["live", "live", "live"]);
      expect(await eventsOf(user)).toEqual([]);
    }
  });

  it("a sid without a user names no session here: refused, nothing held", async () => {
    const user = newUser();
    const session = await signIn(user, "sid-1");
    const response = await callWith(
      DEFAULTS,
      "POST",
      "/ssf/inbound",
      { "Content-Type": "application/secevent+jwt" },
      await set(user, "credential-change", {}, { sub_id: complex(null, "sid-1") }),
    );
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 400,
      body: {
        err: "invalid_request",
        description: "The subject names no user in this issuer's format (iss_sub) and no session of this service.",
      },
    });
    expect(await stateOf(session)).toBe("live");
  });

  it("a session of the user not signed in through the upstream is not held, even named", async () => {
    const { user, local } = await userWithTwo();
    await push(await set(user, "credential-change", {}, { sub_id: complex(user, local.id) }));
    expect(await stateOf(local)).toBe("live");
    expect(await eventsOf(user)).toEqual([]);
  });

  it("a subject with no session here changes nothing", async () => {
    const { user, federated, local } = await userWithTwo();
    const stranger = newUser();
    for (const event of ["credential-change", "session-revoked", "token-claims-change"])
      await push(await set(stranger, event));
    expect([await stateOf(federated), await stateOf(local)]).toEqual(["live", "live"]);
    expect([await eventsOf(user), await eventsOf(stranger)]).toEqual([[], []]);
  });

  it("a jti received before holds nothing again, after the hold was lifted", async () => {
    const { user, federated } = await userWithTwo();
    const sent = await set(user, "credential-change", { event_timestamp: now() - 5 });
    await push(sent);
    const reissued = await service().reauthenticate({ token: federated.token, upstream: freshSignIn(user, now()) });
    await push(sent);
    expect(await stateOf({ ...federated, token: reissued?.token as string })).toBe("live");
    expect((await eventsOf(user)).map((event) => event.type)).toEqual(["held_by_upstream", "reauthenticated"]);
  });

  it("a hold still needs every rule of the receiver: another audience is refused and holds nothing", async () => {
    const { user, federated } = await userWithTwo();
    const response = await callWith(
      DEFAULTS,
      "POST",
      "/ssf/inbound",
      { "Content-Type": "application/secevent+jwt" },
      await set(user, "credential-change", {}, { aud: "https://elsewhere.example" }),
    );
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 400,
      body: { err: "invalid_audience", description: "The SET's aud does not name this receiver." },
    });
    expect(await stateOf(federated)).toBe("live");
  });
});

describe("a refused events member", () => {
  const RULE =
    "SSF_UPSTREAMS must be a JSON array of upstreams: events is an object whose members are CAEP events (session-revoked, token-claims-change, credential-change, assurance-level-change, device-compliance-change, session-established, session-presented, risk-level-change), each ignore, log, hold, end";
  for (const [name, events, message] of [
    ["not an object", ["credential-change"], RULE],
    ["an event CAEP 1.0 does not have", { "credential-changed": "hold" }, RULE],
    ["an action that is none", { "credential-change": "block" }, RULE],
    ["a former spelling of the context settings, which an event never took", { "credential-change": "step-up" }, RULE],
    [
      "events without audience",
      undefined,
      "SSF_UPSTREAMS must be a JSON array of upstreams: events come with audience and subject (an upstream that sends SETs)",
    ],
  ] as const) {
    it(`${name}: 500 and a config_error line naming the rule, nothing held`, async () => {
      const errors = vi.spyOn(console, "error").mockImplementation(() => {});
      const { user, federated } = await userWithTwo();
      const entry =
        events === undefined
          ? upstream({
              audience: undefined,
              subject: undefined,
              client_id: "sessions",
              events: { "credential-change": "hold" },
            })
          : upstream({ events });
      const bindings = { SSF_UPSTREAMS: JSON.stringify([entry]) };
      const response = await callWith(
        bindings,
        "POST",
        "/ssf/inbound",
        { "Content-Type": "application/secevent+jwt" },
        await set(user, "credential-change"),
      );
      await expectError(response, 500, "internal_error", { cacheControl: null });
      expect(errors.mock.calls.map((args) => JSON.parse(String(args[0])))).toEqual([
        expect.objectContaining({ event: "config_error", message }),
      ]);
      expect(await stateOf(federated)).toBe("live");
    });
  }
});
