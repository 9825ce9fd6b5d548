import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { base64url, decodeJwt, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bucketOf } from "../src/db/shards.ts";
import { bucketKey, DEFAULT_REGION } from "../src/domain/token.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { purge } from "../src/services/purge.ts";
import {
  bearer,
  CRIT_HEADERS,
  call,
  callWith,
  d1OfUser,
  expectError,
  expectSecurityHeaders,
  forgedJws,
  isLive,
  issue,
  newUser,
  shardBindings,
  twoRegions,
} from "./helpers.ts";
import { admin, adminKeyVars, newOrganization, signIn } from "./organization-fixtures.ts";
import { newReceiver, ssfCall, transmitter } from "./ssf.ts";

// Inbound SETs (POST /ssf/inbound), pushed by the upstreams of SSF_UPSTREAMS and signed here
// with `jose` (or by hand, for what jose would refuse to sign), end sessions.

const ISSUER = "https://idp.example";
const AUDIENCE = "https://sessions.example/ssf";
const PATH = "/ssf/inbound";
const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";
const RISC = "https://schemas.openid.net/secevent/risc/event-type/";
const SESSION_REVOKED = `${CAEP}session-revoked`;

const es256 = await generateKeyPair("ES256", { extractable: true });
const rs256 = await generateKeyPair("RS256", { extractable: true });
const other = await generateKeyPair("ES256", { extractable: true });
/** rs1's private key as a JWK without alg: jose signs any RSA algorithm with it. */
const RS_PRIVATE_JWK = await exportJWK(rs256.privateKey);
const PUBLIC_KEYS = [
  { ...(await exportJWK(es256.publicKey)), kid: "es1", alg: "ES256", use: "sig" },
  { ...(await exportJWK(rs256.publicKey)), kid: "rs1" },
];

type UpstreamConfig = Record<string, unknown>;
// The receiver's rules, with subjects in this service's user ids (the sessions here are signed in
// locally); the provider's own subjects are test/upstream-events.test.ts's.
const upstream = (overrides: UpstreamConfig = {}): UpstreamConfig => ({
  issuer: ISSUER,
  name: "idp",
  audience: AUDIENCE,
  subject: "iss_sub",
  subjects_are_user_ids: true,
  jwks: { keys: PUBLIC_KEYS },
  ...overrides,
});
const vars = (...upstreams: UpstreamConfig[]): Partial<Env> => ({
  SSF_UPSTREAMS: JSON.stringify(upstreams.length > 0 ? upstreams : [upstream()]),
});

const now = () => Math.floor(Date.now() / 1000);

/** A SET's claims about `userId` (an iss_sub subject), one event. */
function claims(userId: string, event = SESSION_REVOKED, overrides: JWTPayload = {}): JWTPayload {
  return {
    iss: ISSUER,
    aud: AUDIENCE,
    iat: now(),
    jti: crypto.randomUUID(),
    sub_id: { format: "iss_sub", iss: ISSUER, sub: userId },
    events: { [event]: { event_timestamp: now() } },
    ...overrides,
  };
}

interface Signing {
  /** PS256 and RS384: algorithms this receiver does not take, signed with `key` (a JWK). */
  alg?: "ES256" | "RS256" | "PS256" | "RS384";
  kid?: string | null;
  typ?: string;
  key?: CryptoKey | JWK;
}

function sign(
  payload: JWTPayload,
  { alg = "ES256", kid = alg === "ES256" ? "es1" : "rs1", typ = "secevent+jwt", key }: Signing = {},
) {
  const header = { alg, typ, ...(kid === null ? {} : { kid }) };
  return new SignJWT(payload).setProtectedHeader(header).sign(key ?? (alg === "ES256" ? es256 : rs256).privateKey);
}

/** Signed by hand with the es1 key and more header members: jose will not sign a crit it does not know. */
async function signWithHeader(payload: JWTPayload, header: Record<string, unknown>): Promise<string> {
  const encode = (value: unknown) => base64url.encode(JSON.stringify(value));
  const signed = `${encode({ alg: "ES256", typ: "secevent+jwt", kid: "es1", ...header })}.${encode(payload)}`;
  const signature = await crypto.subtle.sign(
    { name: "ECDSA", hash: "SHA-256" },
    es256.privateKey,
    new TextEncoder().encode(signed),
  );
  return `${signed}.${base64url.encode(new Uint8Array(signature))}`;
}

/** A SET signed by another key than the issuer's, which its header carries as a key would be: `jwk`, `jku`, `x5u`, `x5c`. */
async function signCarrying(payload: JWTPayload, kid: string): Promise<string> {
  const jwk = { ...(await exportJWK(other.publicKey)), kid };
  const carried = {
    jwk,
    jku: "https://evil.example/jwks",
    x5u: "https://evil.example/cert.pem",
    x5c: [btoa("the attacker's certificate")],
  };
  return new SignJWT(payload)
    .setProtectedHeader({ alg: "ES256", typ: "secevent+jwt", kid, ...carried })
    .sign(other.privateKey);
}

function push(body: BodyInit, bindings = vars(), contentType = "application/secevent+jwt"): Promise<Response> {
  return callWith(bindings, "POST", PATH, { "Content-Type": contentType }, body);
}

async function expectAccepted(response: Response): Promise<void> {
  expect(response.status).toBe(202);
  expect(await response.text()).toBe("");
  expectSecurityHeaders(response);
}

async function expectRefused(response: Response, err: string, description: string): Promise<void> {
  expect({ status: response.status, body: await response.json() }).toEqual({ status: 400, body: { err, description } });
  expect(response.headers.get("Content-Type")).toBe("application/json");
  expect(response.headers.get("Content-Language")).toBe("en");
  expectSecurityHeaders(response);
}

/** The user's `ended_by_upstream` events, oldest first. */
async function upstreamEndings(userId: string) {
  const { results } = await (await d1OfUser(userId))
    .prepare(
      "SELECT session_id, reason, actor_session_id FROM session_events WHERE user_id = ? AND type = 'ended_by_upstream' ORDER BY id",
    )
    .bind(userId)
    .all<{ session_id: string; reason: string; actor_session_id: string | null }>();
  return results;
}

/** `entry` as an organization registers it at runtime (POST /admin/organizations/{id}/providers), under a name of its own. */
async function registered(entry: UpstreamConfig): Promise<string> {
  const { ADMIN_KEYS, key } = await adminKeyVars();
  const organization = await newOrganization("IdP's tenant");
  const name = `${entry.name}-${crypto.randomUUID().slice(0, 8)}`;
  const path = `/admin/organizations/${organization}/providers`;
  const answer = await admin({ ...vars(), ADMIN_KEYS } as Partial<Env>, key, "POST", path, { ...entry, name });
  if (answer.status !== 201) throw new Error(`registering a provider answered ${answer.status}`);
  return name;
}
/** idp again, an organization's: its SETs come to its own URL and reach its organization's sessions alone. */
const RUNTIME = await registered(upstream());
/** Each URL the refusals must hold at, and a session there each case's SET would end were it taken. */
const RECEIVERS = [
  { kind: "the URL of SSF_UPSTREAMS' entries", path: PATH, session: (user: string) => issue(user) },
  {
    kind: "an organization's provider's URL",
    path: `${PATH}/${RUNTIME}`,
    session: (user: string) => signIn(vars(), user, RUNTIME, `sub-${user}`),
  },
];
/** Another organization's provider, with an issuer and a key of its own. */
const ELSEWHERE_ISSUER = "https://tenant-b.example";
await registered(
  upstream({
    name: "tenant-b",
    issuer: ELSEWHERE_ISSUER,
    jwks: { keys: [{ ...(await exportJWK(other.publicKey)), kid: "o1", alg: "ES256" }] },
  }),
);

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("the events acted on", () => {
  const USER_WIDE = [
    [`${CAEP}session-revoked`, "session-revoked"],
    [`${RISC}account-disabled`, "account-disabled"],
    [`${RISC}account-purged`, "account-purged"],
    [`${RISC}credential-compromise`, "credential-compromise"],
    [`${RISC}sessions-revoked`, "sessions-revoked"],
  ];
  for (const [uri, name] of USER_WIDE) {
    it(`${name} ends every session of the user, logged ended_by_upstream with reason idp:${name}`, async () => {
      const user = newUser();
      const [a, b] = [await issue(user), await issue(user)];
      const bystander = await issue(newUser());
      await expectAccepted(await push(await sign(claims(user, uri))));
      expect([await isLive(a.token), await isLive(b.token), await isLive(bystander.token)]).toEqual([
        false,
        false,
        true,
      ]);
      const endings = await upstreamEndings(user);
      expect(endings.map((e) => e.session_id).sort()).toEqual([a.id, b.id].sort());
      for (const ending of endings) expect(ending).toMatchObject({ reason: `idp:${name}`, actor_session_id: null });
    });
  }

  it("the user sees the ending in GET /auth/events", async () => {
    const user = newUser();
    const ended = await issue(user);
    await expectAccepted(await push(await sign(claims(user, `${RISC}credential-compromise`))));
    const later = await issue(user);
    const response = await call("GET", "/auth/events", bearer(later.token));
    const { events } = (await response.json()) as { events: { type: string; session_id: string; reason: string }[] };
    expect(events.find((e) => e.type === "ended_by_upstream")).toMatchObject({
      session_id: ended.id,
      reason: "idp:credential-compromise",
    });
  });

  it("session-revoked naming one of this service's sessions ends only that one", async () => {
    const user = newUser();
    const [kept, revoked] = [await issue(user), await issue(user)];
    const subject = {
      format: "complex",
      user: { format: "iss_sub", iss: ISSUER, sub: user },
      session: { format: "opaque", id: revoked.id },
    };
    await expectAccepted(await push(await sign(claims(user, SESSION_REVOKED, { sub_id: subject }))));
    expect([await isLive(kept.token), await isLive(revoked.token)]).toEqual([true, false]);
    expect(await upstreamEndings(user)).toEqual([
      { session_id: revoked.id, reason: "idp:session-revoked", actor_session_id: null },
    ]);
  });

  it("a session of another user named with this user ends nothing; a session alone ends that session", async () => {
    const [user, stranger] = [newUser(), newUser()];
    const strangers = await issue(stranger);
    const mine = await issue(user);
    const mixed = {
      format: "complex",
      user: { format: "iss_sub", iss: ISSUER, sub: user },
      session: { format: "opaque", id: strangers.id },
    };
    await expectAccepted(await push(await sign(claims(user, SESSION_REVOKED, { sub_id: mixed }))));
    expect([await isLive(strangers.token), await isLive(mine.token)]).toEqual([true, true]);
    const alone = { format: "complex", session: { format: "opaque", id: strangers.id } };
    await expectAccepted(await push(await sign(claims(user, SESSION_REVOKED, { sub_id: alone }))));
    expect(await isLive(strangers.token)).toBe(false);
  });

  it("an account event with a session member still ends every session of the user", async () => {
    const user = newUser();
    const [a, b] = [await issue(user), await issue(user)];
    const subject = {
      format: "complex",
      user: { format: "iss_sub", iss: ISSUER, sub: user },
      session: { format: "opaque", id: a.id },
    };
    await expectAccepted(await push(await sign(claims(user, `${RISC}account-disabled`, { sub_id: subject }))));
    expect([await isLive(a.token), await isLive(b.token)]).toEqual([false, false]);
  });

  it("an upstream session id (not one of ours) that no session was signed in with ends nothing: not the user's other sessions", async () => {
    // The second is 16 random bytes alone, as an upstream's id may well be: ours start with a bucket.
    for (const id of ["dMTlD|1600802906337.16|16008.16", "A".repeat(22)]) {
      const user = newUser();
      const session = await issue(user);
      const subject = {
        format: "complex",
        user: { format: "iss_sub", iss: ISSUER, sub: user },
        session: { format: "opaque", id },
      };
      await expectAccepted(await push(await sign(claims(user, SESSION_REVOKED, { sub_id: subject }))));
      expect(await isLive(session.token)).toBe(true);
    }
  });

  it("opaque subjects, RS256, the subject in the event (before SSF 1.0), typ with application/", async () => {
    const user = newUser();
    const session = await issue(user);
    const { sub_id: _, ...withoutSubId } = claims(user, `${RISC}account-purged`);
    const payload = {
      ...withoutSubId,
      events: { [`${RISC}account-purged`]: { subject: { format: "opaque", id: user } } },
    };
    const bindings = vars(upstream({ subject: "opaque" }));
    await expectAccepted(await push(await sign(payload, { alg: "RS256", typ: "application/secevent+jwt" }), bindings));
    expect(await isLive(session.token)).toBe(false);
    expect(await upstreamEndings(user)).toMatchObject([{ reason: "idp:account-purged" }]);
  });

  it("a key set of one key needs no kid; aud may be a list", async () => {
    const user = newUser();
    const session = await issue(user);
    const bindings = vars(upstream({ jwks: { keys: [PUBLIC_KEYS[0]] } }));
    await expectAccepted(
      await push(await sign(claims(user, SESSION_REVOKED, { aud: ["x", AUDIENCE] }), { kid: null }), bindings),
    );
    expect(await isLive(session.token)).toBe(false);
  });

  it("a SET signed by hand as the crit cases are, without a crit, is acted on", async () => {
    const user = newUser();
    const session = await issue(user);
    await expectAccepted(await push(await signWithHeader(claims(user), {})));
    expect(await isLive(session.token)).toBe(false);
  });

  it.runIf(shardBindings().length > 1)(
    "an upstream with a region ends its users' sessions there, and none of the same user id elsewhere",
    async () => {
      const regional = twoRegions();
      const service = new SessionService(createExecutionContext(), { ...env, ...regional });
      const user = newUser();
      const [eu, home] = [await service.create({ userId: user, region: "eu" }), await service.create({ userId: user })];
      await expectAccepted(await push(await sign(claims(user)), { ...vars(upstream({ region: "eu" })), ...regional }));
      expect([await service.authenticate(eu.token), await service.authenticate(home.token)]).toEqual([
        null,
        expect.objectContaining({ sessionId: home.id }),
      ]);
    },
  );

  it("an ending goes out to the transmitter's streams as session-revoked by the system, with the reason", async () => {
    const { vars: transmitting } = await transmitter();
    const receiver = await newReceiver("https://downstream.example");
    const created = await ssfCall(transmitting, receiver.credential, "POST", "/ssf/streams", {});
    const { stream_id } = (await created.json()) as { stream_id: string };
    const user = newUser();
    const session = await issue(user);
    await expectAccepted(
      await push(await sign(claims(user, `${RISC}account-disabled`)), { ...vars(), ...transmitting }),
    );
    const polled = await ssfCall(transmitting, receiver.credential, "POST", `/ssf/streams/poll/${stream_id}`, {
      returnImmediately: true,
    });
    const { sets } = (await polled.json()) as { sets: Record<string, string> };
    const revoked = Object.values(sets)
      .map((set) => decodeJwt(set))
      .filter((set) => JSON.stringify(set.sub_id).includes(session.id));
    expect(revoked.map((set) => set.events)).toEqual([
      {
        [SESSION_REVOKED]: {
          event_timestamp: expect.any(Number),
          initiating_entity: "system",
          reason_admin: { en: "idp:account-disabled" },
        },
      },
    ]);
  });

  it("an upstream region SHARDS lacks is a config error: 500, nothing ends", async () => {
    const user = newUser();
    const session = await issue(user);
    await expectError(await push(await sign(claims(user)), vars(upstream({ region: "eu" }))), 500, "internal_error", {
      cacheControl: null,
    });
    expect(await isLive(session.token)).toBe(true);
  });
});

describe("accepted without acting", () => {
  it("an unknown event type: 202, nothing ends", async () => {
    const user = newUser();
    const session = await issue(user);
    await expectAccepted(await push(await sign(claims(user, "https://schemas.example/secevent/event-type/unknown"))));
    expect(await isLive(session.token)).toBe(true);
    expect(await upstreamEndings(user)).toEqual([]);
  });

  it("the same jti from another issuer is another SET", async () => {
    const user = newUser();
    const jti = crypto.randomUUID();
    const bindings = vars(upstream(), upstream({ issuer: "https://other.example", name: "other" }));
    await issue(user);
    await expectAccepted(await push(await sign(claims(user, SESSION_REVOKED, { jti })), bindings));
    const since = await issue(user);
    const otherSubject = { format: "iss_sub", iss: "https://other.example", sub: user };
    const fromOther = claims(user, SESSION_REVOKED, { jti, iss: "https://other.example", sub_id: otherSubject });
    await expectAccepted(await push(await sign(fromOther), bindings));
    expect(await isLive(since.token)).toBe(false);
    expect((await upstreamEndings(user)).map((e) => e.reason)).toEqual([
      "idp:session-revoked",
      "other:session-revoked",
    ]);
  });
});

describe.each(RECEIVERS)("a jti received before, at $kind", (receiver) => {
  it("202 again, nothing ended twice, and a session issued since stays live", async () => {
    const user = newUser();
    const first = await receiver.session(user);
    const set = await sign(claims(user, `${RISC}account-disabled`));
    const send = () => callWith(vars(), "POST", receiver.path, { "Content-Type": "application/secevent+jwt" }, set);
    await expectAccepted(await send());
    expect(await isLive(first.token)).toBe(false);
    const since = await receiver.session(user);
    await expectAccepted(await send());
    expect(await isLive(since.token)).toBe(true);
    expect(await upstreamEndings(user)).toHaveLength(1);
  });
});

describe.each(RECEIVERS)("refused at $kind: 400 {err, description}, Content-Language: en, nothing ends", (receiver) => {
  // One user for every case: each case checks that its session is still live.
  const USER = newUser();
  const send = (body: string, contentType: string | null = "application/secevent+jwt") =>
    callWith(vars(), "POST", receiver.path, contentType === null ? {} : { "Content-Type": contentType }, body);
  const cases: [string, () => Promise<Response>, string, string][] = [
    [
      "another content type",
      async () => send(await sign(claims(USER)), "application/jwt"),
      "invalid_request",
      "The Content-Type is not application/secevent+jwt.",
    ],
    [
      "no content type",
      async () => send(await sign(claims(USER)), null),
      "invalid_request",
      "The Content-Type is not application/secevent+jwt.",
    ],
    [
      "a body that is not a JWS",
      async () => send("not.a.set"),
      "invalid_request",
      "The body is not a compact JWS signed with ES256 or RS256.",
    ],
    [
      "an empty body",
      async () => send(""),
      "invalid_request",
      "The body is not a compact JWS signed with ES256 or RS256.",
    ],
    [
      "an oversized body",
      async () => send("a".repeat(16_385)),
      "invalid_request",
      "The body is longer than 16384 bytes.",
    ],
    ...Object.entries(CRIT_HEADERS).map(([name, header]): [string, () => Promise<Response>, string, string] => [
      `a header with ${name}`,
      async () => send(await signWithHeader(claims(USER), header)),
      "invalid_request",
      "The body is not a compact JWS signed with ES256 or RS256.",
    ]),
    [
      "alg none",
      async () => send(await forgedJws({ alg: "none", typ: "secevent+jwt", kid: "es1" }, claims(USER), null)),
      "invalid_request",
      "The body is not a compact JWS signed with ES256 or RS256.",
    ],
    [
      "HS256 keyed with the issuer's public key",
      async () => {
        const secret = new TextEncoder().encode(JSON.stringify(PUBLIC_KEYS[0]));
        return send(await forgedJws({ alg: "HS256", typ: "secevent+jwt", kid: "es1" }, claims(USER), secret));
      },
      "invalid_request",
      "The body is not a compact JWS signed with ES256 or RS256.",
    ],
    [
      "typ JWT",
      async () => send(await sign(claims(USER), { typ: "JWT" })),
      "invalid_request",
      'The JWS header typ is not "secevent+jwt".',
    ],
    [
      "an unknown issuer",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { iss: "https://evil.example" }))),
      "invalid_issuer",
      "The SET's iss is not an issuer this receiver trusts.",
    ],
    [
      "the SET of another organization's provider, at this URL",
      async () =>
        send(
          await sign(claims(USER, SESSION_REVOKED, { iss: ELSEWHERE_ISSUER }), { kid: "o1", key: other.privateKey }),
        ),
      "invalid_issuer",
      "The SET's iss is not an issuer this receiver trusts.",
    ],
    [
      "an unknown kid",
      async () => send(await sign(claims(USER), { kid: "nope" })),
      "invalid_key",
      "The SET's kid names no key of its issuer.",
    ],
    [
      "no kid with several keys",
      async () => send(await sign(claims(USER), { kid: null })),
      "invalid_key",
      "The SET's kid names no key of its issuer.",
    ],
    [
      "a kid naming a key of another algorithm",
      async () => send(await sign(claims(USER), { alg: "RS256", kid: "es1" })),
      "invalid_key",
      "The key the SET names cannot verify RS256 signatures.",
    ],
    // rs1 is published without alg, as many upstreams publish their keys: jose alone would
    // verify any RSA algorithm with it, and only the allow-list of ES256 and RS256 refuses these.
    ...(["PS256", "RS384"] as const).map((alg): [string, () => Promise<Response>, string, string] => [
      `${alg}, signed by the issuer's RSA key (published without alg)`,
      async () => send(await sign(claims(USER), { alg, key: RS_PRIVATE_JWK })),
      "invalid_request",
      "The body is not a compact JWS signed with ES256 or RS256.",
    ]),
    [
      "a bad signature",
      async () => send(await sign(claims(USER), { key: other.privateKey })),
      "authentication_failed",
      "The SET's signature does not verify with its issuer's key.",
    ],
    [
      "signed by the key its header carries (jwk, jku, x5u, x5c), under the issuer's kid",
      async () => send(await signCarrying(claims(USER), "es1")),
      "authentication_failed",
      "The SET's signature does not verify with its issuer's key.",
    ],
    [
      "signed by the key its header carries, under a kid the issuer does not have",
      async () => send(await signCarrying(claims(USER), "attacker")),
      "invalid_key",
      "The SET's kid names no key of its issuer.",
    ],
    [
      "a wrong audience",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { aud: "https://elsewhere.example" }))),
      "invalid_audience",
      "The SET's aud does not name this receiver.",
    ],
    [
      "an aud list without this receiver",
      async () =>
        send(await sign(claims(USER, SESSION_REVOKED, { aud: ["https://elsewhere.example", `${AUDIENCE}/`] }))),
      "invalid_audience",
      "The SET's aud does not name this receiver.",
    ],
    [
      "no iat",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { iat: undefined }))),
      "invalid_request",
      "The SET has no numeric iat.",
    ],
    [
      "an iat over 24 hours old",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { iat: now() - 86_401 }))),
      "invalid_request",
      "The SET has an iat in the future or more than 24 hours old.",
    ],
    [
      "an iat in the future beyond the skew",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { iat: now() + 61 }))),
      "invalid_request",
      "The SET has an iat in the future or more than 24 hours old.",
    ],
    [
      "an exp passed beyond the skew",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { exp: now() - 61 }))),
      "invalid_request",
      "The SET has expired (exp).",
    ],
    [
      "an nbf in the future beyond the skew (RFC 7519 binds any JWT)",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { nbf: now() + 600 }))),
      "invalid_request",
      "The SET is not valid yet (nbf).",
    ],
    [
      "an nbf that is not a number",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { nbf: "soon" as unknown as number }))),
      "invalid_request",
      "The SET is not valid yet (nbf).",
    ],
    [
      "no jti",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { jti: undefined }))),
      "invalid_request",
      "The SET has no jti of 1 to 256 characters.",
    ],
    [
      "no events",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { events: {} }))),
      "invalid_request",
      "The SET has no events object.",
    ],
    [
      "an event payload that is not an object",
      async () => send(await sign(claims(USER, SESSION_REVOKED, { events: { [SESSION_REVOKED]: "x" } }))),
      "invalid_request",
      "The event's payload is not an object.",
    ],
    [
      "a subject in another format",
      async () =>
        send(await sign(claims(USER, SESSION_REVOKED, { sub_id: { format: "email", email: "a@example.com" } }))),
      "invalid_request",
      "The subject names no user in this issuer's format (iss_sub) and no session of this service.",
    ],
    [
      "an iss_sub subject of another issuer",
      async () =>
        send(
          await sign(
            claims(USER, SESSION_REVOKED, { sub_id: { format: "iss_sub", iss: "https://evil.example", sub: USER } }),
          ),
        ),
      "access_denied",
      "The subject's iss is not the SET's issuer: an upstream speaks for its own users only.",
    ],
    [
      "a user id this service cannot hold",
      async () => send(await sign(claims(" padded", SESSION_REVOKED))),
      "invalid_request",
      "The subject's user id is not one this service can hold.",
    ],
  ];
  for (const [name, send, err, description] of cases) {
    it(name, async () => {
      const session = await receiver.session(USER);
      await expectRefused(await send(), err, description);
      expect(await isLive(session.token)).toBe(true);
    });
  }
  it("nothing any refusal above did is in the log", async () => {
    expect(await upstreamEndings(USER)).toEqual([]);
  });
});

describe("the endpoint", () => {
  it("answers 404 when SSF_UPSTREAMS is empty", async () => {
    const response = await push(await sign(claims(newUser())), { SSF_UPSTREAMS: "" });
    await expectError(response, 404, "not_found", { cacheControl: null });
  });

  it("answers other methods 405 with Allow: POST", async () => {
    for (const method of ["GET", "PUT", "DELETE"]) {
      await expectError(await callWith(vars(), method, PATH), 405, "method_not_allowed", {
        allow: "POST",
        cacheControl: null,
      });
    }
  });

  it("a refused SSF_UPSTREAMS: 500 internal_error and a config_error line naming the var, never a value", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const secretish = "https://secret-tenant.example";
    for (const value of [
      "not json",
      JSON.stringify({}),
      JSON.stringify([upstream({ jwks: undefined })]),
      JSON.stringify([upstream({ jwks_uri: "http://insecure.example/jwks", jwks: undefined })]),
      JSON.stringify([upstream({ subject: "email" })]),
      JSON.stringify([upstream({ name: "a".repeat(43) })]),
      JSON.stringify([upstream({ issuer: secretish }), upstream({ issuer: secretish, name: "two" })]),
      JSON.stringify([upstream(), upstream({ issuer: "https://other.example" })]),
    ]) {
      errors.mockClear();
      await expectError(await push("x", { SSF_UPSTREAMS: value }), 500, "internal_error", { cacheControl: null });
      const lines = errors.mock.calls.map((args) => String(args[0]));
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0] as string)).toMatchObject({
        event: "config_error",
        message: expect.stringMatching(/^SSF_UPSTREAMS/),
      });
      expect(lines[0]).not.toContain("secret-tenant");
    }
  });
});

describe("the purge", () => {
  it("forgets a received SET once it is older than the maximum age plus the skew, and keeps a younger one", async () => {
    const user = newUser();
    await expectAccepted(await push(await sign(claims(user))));
    const db = await d1OfUser(user);
    const old = Date.now() - (86_400 + 60) * 1000 - 1;
    await db
      .prepare("INSERT INTO ssf_received_sets (issuer, jti, received_at, bucket) VALUES (?, ?, ?, ?)")
      .bind(ISSUER, `old-${user}`, old, bucketKey({ region: DEFAULT_REGION, bucket: await bucketOf(user) }))
      .run();
    vi.spyOn(console, "log").mockImplementation(() => {});
    expect((await purge(env)).receivedSets).toBeGreaterThanOrEqual(1);
    const { results } = await db
      .prepare("SELECT jti FROM ssf_received_sets WHERE jti = ? OR received_at > ?")
      .bind(`old-${user}`, old)
      .all<{ jti: string }>();
    expect(results.length).toBeGreaterThan(0);
    expect(results.map((row) => row.jti)).not.toContain(`old-${user}`);
  });
});

describe("a key set fetched from jwks_uri", () => {
  it("is fetched once, kept, and fetched again for an unknown kid at most once a minute: within it, 503 until it ends", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const warnings = vi.spyOn(console, "warn").mockImplementation(() => {});
    const jwksUri = `https://idp.example/jwks/${crypto.randomUUID()}`;
    let served = [PUBLIC_KEYS[0]];
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
      expect(String(input instanceof Request ? input.url : input)).toBe(jwksUri);
      return Response.json({ keys: served });
    });
    const bindings = vars(upstream({ jwks: undefined, jwks_uri: jwksUri }));
    const user = newUser();
    await expectAccepted(await push(await sign(claims(user)), bindings));
    await expectAccepted(await push(await sign(claims(user)), bindings));
    expect(fetches).toHaveBeenCalledTimes(1);
    // The upstream rotates to its RS256 key: within the minute, the cached set cannot name it, and
    // the transmitter is told to resend once the set may be fetched again.
    served = [PUBLIC_KEYS[1]];
    vi.setSystemTime(Date.now() + 15_000);
    const rotated = await sign(claims(user), { alg: "RS256" });
    const response = await push(rotated, bindings);
    await expectError(response, 503, "service_unavailable", { cacheControl: null, retryAfter: "45" });
    expect(fetches).toHaveBeenCalledTimes(1);
    expect(warnings.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual(
      expect.objectContaining({ event: "upstream_keys_unavailable", upstream: "idp", why: "unknown_kid" }),
    );
    vi.setSystemTime(Date.now() + 45_000);
    await expectAccepted(await push(rotated, bindings));
    expect(fetches).toHaveBeenCalledTimes(2);
    // A minute on, an unknown kid fetches the set again: still lacking it, the SET is refused.
    vi.setSystemTime(Date.now() + 60_000);
    await expectRefused(
      await push(await sign(claims(user), { kid: "nope" }), bindings),
      "invalid_key",
      "The SET's kid names no key of its issuer.",
    );
    expect(fetches).toHaveBeenCalledTimes(3);
  });

  it("a key set that cannot be fetched: 503 with Retry-After and a warn line naming the upstream, fetched again only after it; nothing ends", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const warnings = vi.spyOn(console, "warn").mockImplementation(() => {});
    const fetches = vi.spyOn(globalThis, "fetch").mockResolvedValue(new Response("down", { status: 503 }));
    const user = newUser();
    const session = await issue(user);
    const bindings = vars(upstream({ jwks: undefined, jwks_uri: `https://idp.example/jwks/${crypto.randomUUID()}` }));
    for (let attempt = 0; attempt < 2; attempt++) {
      const response = await push(await sign(claims(user)), bindings);
      await expectError(response, 503, "service_unavailable", { cacheControl: null });
      expect(response.headers.get("Retry-After")).toBe("10");
    }
    // A burst during the outage costs one fetch per Retry-After, not one each.
    expect(fetches).toHaveBeenCalledTimes(1);
    expect(warnings.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual({
      level: "warn",
      event: "upstream_keys_unavailable",
      upstream: "idp",
      why: "unavailable",
      failure: "JOSEError",
      method: "POST",
      route: "/ssf/inbound",
      request_id: expect.any(String),
    });
    vi.setSystemTime(Date.now() + 10_000);
    fetches.mockResolvedValue(Response.json({ keys: PUBLIC_KEYS }));
    await expectAccepted(await push(await sign(claims(user)), bindings));
    expect(fetches).toHaveBeenCalledTimes(2);
    expect(await isLive(session.token)).toBe(false);
  });

  it("a key set that is not a JWK Set, or a fetch that throws: 503, nothing ends", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    const user = newUser();
    const session = await issue(user);
    for (const answer of [() => Response.json({ nokeys: [] }), () => new Response("{not json")]) {
      vi.spyOn(globalThis, "fetch").mockImplementation(async () => answer());
      const bindings = vars(upstream({ jwks: undefined, jwks_uri: `https://idp.example/jwks/${crypto.randomUUID()}` }));
      await expectError(await push(await sign(claims(user)), bindings), 503, "service_unavailable", {
        cacheControl: null,
      });
    }
    vi.spyOn(globalThis, "fetch").mockRejectedValue(new TypeError("network down"));
    const bindings = vars(upstream({ jwks: undefined, jwks_uri: `https://idp.example/jwks/${crypto.randomUUID()}` }));
    await expectError(await push(await sign(claims(user)), bindings), 503, "service_unavailable", {
      cacheControl: null,
    });
    expect(await isLive(session.token)).toBe(true);
  });

  it("a jwks_uri over http on a loopback host (a provider run locally) is fetched, as SSF_ISSUER allows; http elsewhere is refused", async () => {
    const fetches = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ keys: PUBLIC_KEYS }));
    for (const host of ["127.0.0.1:8080", "localhost:8080", "[::1]:8080"]) {
      const user = newUser();
      const session = await issue(user);
      const jwksUri = `http://${host}/jwks/${crypto.randomUUID()}`;
      await expectAccepted(
        await push(await sign(claims(user)), vars(upstream({ jwks: undefined, jwks_uri: jwksUri }))),
      );
      expect(String(fetches.mock.lastCall?.[0])).toBe(jwksUri);
      expect(await isLive(session.token)).toBe(false);
    }
    vi.spyOn(console, "error").mockImplementation(() => {});
    const elsewhere = upstream({ jwks: undefined, jwks_uri: `http://10.0.0.1/jwks/${crypto.randomUUID()}` });
    await expectError(await push("x", vars(elsewhere)), 500, "internal_error", { cacheControl: null });
  });
});
