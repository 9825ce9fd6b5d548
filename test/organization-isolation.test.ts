import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { CompactEncrypt, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../src/index.ts";
import { countingShards } from "./d1.ts";
import { callWith, d1, databases, isLive, newUser, tableSnapshot } from "./helpers.ts";
import {
  admin,
  adminKeyVars,
  newOrganization,
  organizationOfSession,
  rpc,
  secretsKeys,
  signIn,
} from "./organization-fixtures.ts";
import { transmitter } from "./ssf.ts";

// A provider of organization A acts on A's sessions alone: its logout, revocation and Shared
// Signals never end, hold or report a session of B, though both trust the same issuer (two
// customers of one Google Workspace) and name the same subject, the same user even.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const GOOGLE = "https://accounts.google.com";
const CLIENT_ID = "sessions-app";
const OUR_AUDIENCE = "https://sessions.example/ssf";
const BCL_EVENT = "http://schemas.openid.net/event/backchannel-logout";
const RISC_DISABLED = "https://schemas.openid.net/secevent/risc/event-type/account-disabled";
const CAEP_REVOKED = "https://schemas.openid.net/secevent/caep/event-type/session-revoked";
const keys = await generateKeyPair("ES256", { extractable: true });
const JWKS = { keys: [{ ...(await exportJWK(keys.publicKey)), kid: "g1", alg: "ES256" }] };
const now = () => Math.floor(Date.now() / 1000);

const entry = (name: string, more: Record<string, unknown> = {}) => ({
  name,
  issuer: GOOGLE,
  client_id: CLIENT_ID,
  audience: OUR_AUDIENCE,
  subject: "iss_sub",
  jwks: JWKS,
  ...more,
});

/** Two organizations, each with a provider on the same issuer; `more` for both entries. */
async function twoOrganizations(more: Record<string, unknown> = {}, extra: Partial<Env> = {}) {
  const { ADMIN_KEYS, key } = await adminKeyVars();
  const vars = { ADMIN_KEYS, ...extra } as Partial<Env>;
  const register = async (label: string) => {
    const org = await newOrganization(label);
    const name = `${label}-${crypto.randomUUID().slice(0, 8)}`;
    const response = await admin(vars, key, "POST", `/admin/organizations/${org}/providers`, entry(name, more));
    expect(response.status).toBe(201);
    return { org, name };
  };
  return { vars, key, a: await register("a"), b: await register("b") };
}

const sign = (payload: JWTPayload, typ: string) =>
  new SignJWT(payload).setProtectedHeader({ alg: "ES256", kid: "g1", typ }).sign(keys.privateKey);

function backchannelLogout(vars: Partial<Env>, name: string, sub: string, jti = crypto.randomUUID()) {
  return (async () => {
    const token = await sign(
      { iss: GOOGLE, aud: CLIENT_ID, iat: now(), exp: now() + 120, jti, sub, events: { [BCL_EVENT]: {} } },
      "logout+jwt",
    );
    return callWith(
      vars,
      "POST",
      `/upstreams/${name}/backchannel-logout`,
      { "Content-Type": "application/x-www-form-urlencoded" },
      new URLSearchParams({ logout_token: token }).toString(),
    );
  })();
}

async function globalRevocation(vars: Partial<Env>, name: string, sub: string, jti = crypto.randomUUID()) {
  const path = `/upstreams/${name}/global-token-revocation`;
  const jwt = await sign(
    { iss: GOOGLE, aud: `https://sessions.example${path}`, iat: now(), exp: now() + 300, jti },
    "JWT",
  );
  return callWith(
    vars,
    "POST",
    path,
    { "Content-Type": "application/json", Authorization: `Bearer ${jwt}` },
    JSON.stringify({ sub_id: { format: "iss_sub", iss: GOOGLE, sub } }),
  );
}

async function pushSet(vars: Partial<Env>, name: string, event: string, subject: unknown, jti = crypto.randomUUID()) {
  const set = await sign(
    { iss: GOOGLE, aud: OUR_AUDIENCE, iat: now(), jti, sub_id: subject, events: { [event]: {} } },
    "secevent+jwt",
  );
  return callWith(vars, "POST", `/ssf/inbound/${name}`, { "Content-Type": "application/secevent+jwt" }, set);
}

describe("isolation: a provider acts on its own organization's sessions alone", () => {
  it("one issuer, one subject, one user in two organizations: A's revocation and logout end A's sessions alone, and a jti of A's never blocks B's", async () => {
    const { vars, a, b } = await twoOrganizations();
    const user = newUser();
    const inA = await signIn(vars, user, a.name, "alice");
    const inB = await signIn(vars, user, b.name, "alice");
    const outside = await rpc(vars, (service) => service.create({ userId: user }));
    expect([await organizationOfSession(inA.id), await organizationOfSession(inB.id)]).toEqual([a.org, b.org]);

    // Every session of the user, as A sees them: A's alone.
    const jti = crypto.randomUUID();
    expect((await globalRevocation(vars, a.name, "alice", jti)).status).toBe(204);
    expect([await isLive(inA.token), await isLive(inB.token), await isLive(outside.token)]).toEqual([
      false,
      true,
      true,
    ]);
    // The same jti by B's provider is B's own: acted on.
    expect((await globalRevocation(vars, b.name, "alice", jti)).status).toBe(204);
    expect([await isLive(inB.token), await isLive(outside.token)]).toEqual([false, true]);

    const again = { a: await signIn(vars, user, a.name, "alice"), b: await signIn(vars, user, b.name, "alice") };
    const logoutJti = crypto.randomUUID();
    expect((await backchannelLogout(vars, a.name, "alice", logoutJti)).status).toBe(200);
    expect([await isLive(again.a.token), await isLive(again.b.token)]).toEqual([false, true]);
    expect((await backchannelLogout(vars, b.name, "alice", logoutJti)).status).toBe(200);
    expect(await isLive(again.b.token)).toBe(false);
    expect(await isLive(outside.token)).toBe(true);
  });

  it("subjects_are_user_ids: A's RISC event ends the user's sessions in A alone, and a session of B it names is not reached", async () => {
    const { vars, a, b } = await twoOrganizations({ subjects_are_user_ids: true });
    const user = newUser();
    const inA = await signIn(vars, user, a.name, "alice");
    const inB = await signIn(vars, user, b.name, "alice");
    const outside = await rpc(vars, (service) => service.create({ userId: user }));
    const jti = crypto.randomUUID();
    expect(
      (await pushSet(vars, a.name, RISC_DISABLED, { format: "iss_sub", iss: GOOGLE, sub: user }, jti)).status,
    ).toBe(202);
    expect([await isLive(inA.token), await isLive(inB.token), await isLive(outside.token)]).toEqual([
      false,
      true,
      true,
    ]);
    // A's CAEP session-revoked naming B's session by this service's id, with the user or without.
    for (const subject of [
      { format: "complex", session: { format: "opaque", id: inB.id } },
      {
        format: "complex",
        user: { format: "iss_sub", iss: GOOGLE, sub: user },
        session: { format: "opaque", id: inB.id },
      },
    ])
      expect((await pushSet(vars, a.name, CAEP_REVOKED, subject)).status).toBe(202);
    expect(await isLive(inB.token)).toBe(true);
    // B's SET with A's jti: B's own, acted on.
    expect(
      (await pushSet(vars, b.name, RISC_DISABLED, { format: "iss_sub", iss: GOOGLE, sub: user }, jti)).status,
    ).toBe(202);
    expect([await isLive(inB.token), await isLive(outside.token)]).toEqual([false, true]);
    // The shared endpoint knows only SSF_UPSTREAMS' issuers: an organization's provider has its own URL.
    const set = await sign(
      {
        iss: GOOGLE,
        aud: OUR_AUDIENCE,
        iat: now(),
        jti: crypto.randomUUID(),
        sub_id: { format: "iss_sub", iss: GOOGLE, sub: user },
        events: { [RISC_DISABLED]: {} },
      },
      "secevent+jwt",
    );
    const shared = await callWith(vars, "POST", "/ssf/inbound", { "Content-Type": "application/secevent+jwt" }, set);
    expect(shared.status).toBe(404);
  });

  it("a provider's name given up and taken by another organization reaches none of the first one's sessions, nor is told of them", async () => {
    const { vars: transmitting } = await transmitter();
    const { vars, key, a } = await twoOrganizations({}, transmitting);
    const user = newUser();
    const inA = await signIn(vars, user, a.name, "alice", "sid-a");
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${a.org}/providers/${a.name}`)).status).toBe(200);
    const c = await newOrganization("c");
    const push = { endpoint_url: "https://c.example/ssf/push", events: ["session-revoked"] };
    const taken = entry(a.name, { push });
    expect((await admin(vars, key, "POST", `/admin/organizations/${c}/providers`, taken)).status).toBe(201);
    const sent = vi.spyOn(globalThis, "fetch").mockImplementation(async () => new Response(null, { status: 202 }));
    // Its link to `user` is A's, left behind: C's revocation and a sign-in relinking the subject end nothing of A's.
    expect((await globalRevocation(vars, a.name, "alice")).status).toBe(204);
    const inC = await signIn(vars, newUser(), a.name, "alice");
    expect([await isLive(inA.token), await isLive(inC.token)]).toEqual([true, true]);
    expect(await organizationOfSession(inC.id)).toBe(c);
    // A's session, signed in through the name when it was A's, ends: C's provider is told nothing.
    await rpc(vars, (service) => service.endSession({ sessionId: inA.id, reason: "signed_out" }));
    expect(sent).not.toHaveBeenCalled();
    const queued = await d1("DB")
      .prepare("SELECT count(*) AS n FROM ssf_queued_sets WHERE stream_id = ?")
      .bind(`provider:${a.org}:${a.name}`)
      .first("n");
    expect(queued).toBe(0);
  });
});

describe("a key limited to one organization signs in through its own providers alone", () => {
  it("another organization's provider, or the var's (whose links span the deployment), is unknown to it: 400, nothing written, no link moved", async () => {
    const { vars, a, b } = await twoOrganizations();
    const listed = JSON.stringify([
      { issuer: "https://corp.example", name: "corp", client_id: CLIENT_ID, jwks_uri: "https://corp.example/jwks" },
    ]);
    // The victim signed in through the var's provider, and through B's, as subject "alice".
    const victim = newUser();
    const throughVar = await signIn({ ...vars, SSF_UPSTREAMS: listed }, victim, "corp", "alice");
    const throughB = await signIn(vars, victim, b.name, "alice");
    const { ADMIN_KEYS, key } = await adminKeyVars(["sessions:create"], a.org);
    const limited = { ...vars, ADMIN_KEYS, SSF_UPSTREAMS: listed } as Partial<Env>;
    const before = [await tableSnapshot(), await tableSnapshot("upstream_links")];
    for (const provider of ["corp", b.name]) {
      const refused = await admin(limited, key, "POST", "/admin/sessions", {
        userId: newUser(),
        upstream: { provider, subject: "alice" },
      });
      expect({ status: refused.status, body: await refused.json() }).toEqual({
        status: 400,
        body: {
          code: "invalid_input",
          message:
            "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
          detail:
            "upstream.provider must be the name of an upstream this deployment lists in SSF_UPSTREAMS, or of an enabled provider of an organization",
        },
      });
    }
    expect([await tableSnapshot(), await tableSnapshot("upstream_links")]).toEqual(before);
    expect([await isLive(throughVar.token), await isLive(throughB.token)]).toEqual([true, true]);
    // Its own organization's provider: signed in, in its organization.
    const own = await admin(limited, key, "POST", "/admin/sessions", {
      userId: newUser(),
      upstream: { provider: a.name, subject: "alice" },
    });
    expect(own.status).toBe(201);
  });
});

describe("a sign-in again through an organization's provider", () => {
  it("reauthenticate takes the session's own provider, and refuses the other organization's on the same issuer", async () => {
    const { vars, a, b } = await twoOrganizations();
    const session = await signIn(vars, newUser(), a.name, "alice", "sid-1");
    const again = (provider: string) =>
      rpc(vars, (service) =>
        service.reauthenticate({ token: session.token, upstream: { provider, subject: "alice", auth_time: now() } }),
      );
    await expect(again(b.name)).rejects.toThrow(
      new RangeError("upstream.provider and upstream.subject must be those the session was signed in through"),
    );
    const reissued = await again(a.name);
    expect(reissued?.sessionId).toBe(session.id);
    expect(await organizationOfSession(session.id)).toBe(a.org);
  });
});

describe("a provider stops acting within the bound", () => {
  it("removed or disabled through this isolate: at once", async () => {
    const { vars, key, a } = await twoOrganizations();
    await signIn(vars, newUser(), a.name, "alice");
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(200);
    expect(
      (await admin(vars, key, "PATCH", `/admin/organizations/${a.org}/providers/${a.name}`, { enabled: false })).status,
    ).toBe(200);
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(404);
    expect(
      (await admin(vars, key, "PATCH", `/admin/organizations/${a.org}/providers/${a.name}`, { enabled: true })).status,
    ).toBe(200);
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(200);
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${a.org}/providers/${a.name}`)).status).toBe(200);
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(404);
    expect((await pushSet(vars, a.name, RISC_DISABLED, { format: "iss_sub", iss: GOOGLE, sub: "alice" })).status).toBe(
      404,
    );
  });

  it("its organization removed through this isolate: its providers removed with it, refused at once", async () => {
    const { vars, key, a, b } = await twoOrganizations();
    await signIn(vars, newUser(), a.name, "alice");
    const bob = await signIn(vars, newUser(), b.name, "alice");
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(200);
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${a.org}`)).status).toBe(204);
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(404);
    const left = await d1("DB")
      .prepare("SELECT count(*) AS n FROM organization_providers WHERE organization_id = ?")
      .bind(a.org)
      .first<{ n: number }>();
    expect(left?.n).toBe(0);
    // The other organization's provider, on the same issuer and subject, is untouched.
    expect(await isLive(bob.token)).toBe(true);
    expect((await admin(vars, key, "GET", `/admin/organizations/${b.org}/providers/${b.name}`)).status).toBe(200);
  });

  it("changed elsewhere (another isolate, its row written directly): acts until 30 seconds after this isolate read it, then not", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    vi.setSystemTime(start);
    const { vars, a } = await twoOrganizations();
    const user = newUser();
    const first = await signIn(vars, user, a.name, "alice");
    // Read (and kept) by this isolate now; then disabled by another.
    await d1("DB").prepare("UPDATE organization_providers SET enabled = 0 WHERE name = ?").bind(a.name).run();
    vi.setSystemTime(start + 29_000);
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(200);
    expect(await isLive(first.token)).toBe(false);
    vi.setSystemTime(start + 30_000);
    expect((await backchannelLogout(vars, a.name, "alice")).status).toBe(404);
    await expect(signIn(vars, user, a.name, "alice")).rejects.toThrow(TypeError);
    // Its organization removed elsewhere: the same.
    const { vars: others, b } = await twoOrganizations();
    await signIn(others, newUser(), b.name, "bob");
    await d1("DB").prepare("DELETE FROM organizations WHERE id = ?").bind(b.org).run();
    expect((await backchannelLogout(others, b.name, "bob")).status).toBe(200);
    vi.setSystemTime(start + 60_000);
    expect((await backchannelLogout(others, b.name, "bob")).status).toBe(404);
  });
});

describe("round trips of an organization's provider", () => {
  it("cold, one read of the provider before the work's own; warm, none: its routes and create alike", async () => {
    const { vars, a, b } = await twoOrganizations();
    const counted = async (call: (bindings: Partial<Env>) => Promise<unknown>) => {
      const counter = countingShards(databases());
      await call({ ...vars, ...counter.env });
      return Object.values(counter.roundTrips()).reduce((sum, n) => sum + n, 0);
    };
    // Neither is kept: the admin API's write forgot each in this isolate.
    const coldCreate = await counted((bindings) => signIn(bindings, newUser(), a.name, "cold"));
    const warmCreate = await counted((bindings) => signIn(bindings, newUser(), a.name, "warm"));
    expect(coldCreate - warmCreate).toBe(1);
    // The route's own: the jti recorded and the link read, at once, as for the var's entry (no link: no more).
    const log = vi.spyOn(console, "log");
    const cold = await counted((bindings) => backchannelLogout(bindings, b.name, "nobody"));
    const warm = await counted((bindings) => backchannelLogout(bindings, b.name, "nobody"));
    expect([cold, warm]).toEqual([3, 2]);
    // Planned, each: no request line says a round trip more than the work asked for.
    const requestLines = log.mock.calls.filter(([line]) => String(line).includes('"event":"request"'));
    expect(requestLines).toEqual([]);
  });
});

describe("an unknown name at a provider's routes", () => {
  it("costs one read per isolate and bound, not one per request; a provider registered after is found at once", async () => {
    const { vars, key, a } = await twoOrganizations();
    const name = `unknown-${crypto.randomUUID().slice(0, 8)}`;
    const counted = async (call: (bindings: Partial<Env>) => Promise<Response>) => {
      const counter = countingShards(databases());
      const response = await call({ ...vars, ...counter.env });
      return [response.status, Object.values(counter.roundTrips()).reduce((sum, n) => sum + n, 0)];
    };
    const subject = { format: "iss_sub", iss: GOOGLE, sub: "alice" };
    expect(await counted((bindings) => backchannelLogout(bindings, name, "alice"))).toEqual([404, 1]);
    expect(await counted((bindings) => backchannelLogout(bindings, name, "alice"))).toEqual([404, 0]);
    expect(await counted((bindings) => globalRevocation(bindings, name, "alice"))).toEqual([404, 0]);
    expect(await counted((bindings) => pushSet(bindings, name, RISC_DISABLED, subject))).toEqual([404, 0]);
    // Registered through this isolate: the miss it kept is forgotten with the write.
    const registered = await admin(vars, key, "POST", `/admin/organizations/${a.org}/providers`, entry(name));
    expect(registered.status).toBe(201);
    const session = await signIn(vars, newUser(), name, "alice");
    expect((await backchannelLogout(vars, name, "alice")).status).toBe(200);
    expect(await isLive(session.token)).toBe(false);
  });
});

describe("sign-outs sent back to an organization's provider", () => {
  it("go to the provider the session signed in through, with its own Authorization opened, never to the other organization's", async () => {
    const { vars: transmitting } = await transmitter();
    const { vars, key, a, b } = await twoOrganizations(
      {},
      { ...transmitting, ORGANIZATION_SECRETS_KEYS: secretsKeys() },
    );
    const endpoint = (name: string) => `https://${name}.example/ssf/push`;
    for (const { org, name } of [a, b]) {
      const changed = await admin(vars, key, "PATCH", `/admin/organizations/${org}/providers/${name}`, {
        push: { endpoint_url: endpoint(name), events: ["session-revoked"] },
        authorization: `Bearer token-of-${name}`,
      });
      expect(changed.status).toBe(200);
    }
    const pushes: { url: string; authorization: string | null; sub_id: unknown }[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      const token = new TextDecoder().decode(await request.arrayBuffer());
      const payload = JSON.parse(atob((token.split(".")[1] as string).replaceAll("-", "+").replaceAll("_", "/")));
      pushes.push({ url: request.url, authorization: request.headers.get("Authorization"), sub_id: payload.sub_id });
      return new Response(null, { status: 202 });
    });
    const user = newUser();
    const inA = await signIn(vars, user, a.name, "alice", "sid-a");
    const inB = await signIn(vars, user, b.name, "alice", "sid-b");
    const subjectOf = (sid: string) => ({
      format: "complex",
      user: { format: "iss_sub", iss: GOOGLE, sub: "alice" },
      session: { format: "opaque", id: sid },
    });
    expect((await rpc(vars, (service) => service.endSession({ sessionId: inA.id, reason: "signed_out" }))).ended).toBe(
      true,
    );
    expect(pushes).toEqual([
      { url: endpoint(a.name), authorization: `Bearer token-of-${a.name}`, sub_id: subjectOf("sid-a") },
    ]);
    expect((await rpc(vars, (service) => service.endSession({ sessionId: inB.id, reason: "signed_out" }))).ended).toBe(
      true,
    );
    expect(pushes.slice(1)).toEqual([
      { url: endpoint(b.name), authorization: `Bearer token-of-${b.name}`, sub_id: subjectOf("sid-b") },
    ]);

    // Removed with a SET still due: it is dropped, sent to no one.
    const inAAgain = await signIn(vars, user, a.name, "alice", "sid-a2");
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => new Response(null, { status: 503 }));
    await rpc(vars, (service) => service.endSession({ sessionId: inAAgain.id, reason: "signed_out" }));
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${a.org}/providers/${a.name}`)).status).toBe(200);
    const queued = () =>
      d1("DB")
        .prepare("SELECT count(*) AS n FROM ssf_queued_sets WHERE stream_id = ?")
        .bind(`provider:${a.org}:${a.name}`)
        .first("n");
    expect(await queued()).toBe(1);
    // The minute cron's push, once the SET is due again: its provider gone, it is forgotten.
    const ctx = createExecutionContext();
    const controller = createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() + 3_600_000 });
    await worker.scheduled(controller, { ...env, ...vars }, ctx);
    await waitOnExecutionContext(ctx);
    expect(await queued()).toBe(0);
  });
});

describe("an Authorization that cannot be opened", () => {
  it("a sign-out still waiting for A's provider when it is removed is never pushed to the organization that takes its name", async () => {
    const { vars: transmitting } = await transmitter();
    const { vars, key, a } = await twoOrganizations({}, transmitting);
    const push = (host: string) => ({ endpoint_url: `https://${host}.example/ssf/push`, events: ["session-revoked"] });
    const changed = await admin(vars, key, "PATCH", `/admin/organizations/${a.org}/providers/${a.name}`, {
      push: push("a"),
    });
    expect(changed.status).toBe(200);
    const inA = await signIn(vars, newUser(), a.name, "alice", "sid-a");
    const pushed: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      pushed.push(new Request(input, init).url);
      return new Response(null, { status: 503 });
    });
    // A's endpoint is down: its sign-out waits, queued.
    await rpc(vars, (service) => service.endSession({ sessionId: inA.id, reason: "signed_out" }));
    expect(pushed).toEqual(["https://a.example/ssf/push"]);
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${a.org}/providers/${a.name}`)).status).toBe(200);
    await takenByAnother(vars, key, a.name, push("c"));
    const ctx = createExecutionContext();
    const controller = createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() + 3_600_000 });
    await worker.scheduled(controller, { ...env, ...vars }, ctx);
    await waitOnExecutionContext(ctx);
    expect(pushed).toEqual(["https://a.example/ssf/push"]);
  });

  it("holds back its own provider's SETs alone, logged, until its key is back", async () => {
    const { vars: transmitting } = await transmitter();
    const sealing = secretsKeys();
    const { vars, key, a, b } = await twoOrganizations({}, { ...transmitting, ORGANIZATION_SECRETS_KEYS: sealing });
    const endpoint = (name: string) => `https://${name}.example/ssf/push`;
    const patch = async (org: string, name: string, more: Record<string, unknown>) =>
      expect(
        (
          await admin(vars, key, "PATCH", `/admin/organizations/${org}/providers/${name}`, {
            push: { endpoint_url: endpoint(name), events: ["session-revoked"] },
            ...more,
          })
        ).status,
      ).toBe(200);
    await patch(a.org, a.name, { authorization: "Bearer sealed" });
    await patch(b.org, b.name, {});
    const pushed: { url: string; authorization: string | null }[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      pushed.push({ url: request.url, authorization: request.headers.get("Authorization") });
      return new Response(null, { status: 202 });
    });
    const inA = await signIn(vars, newUser(), a.name, "alice", "sid-a");
    const inB = await signIn(vars, newUser(), b.name, "bob", "sid-b");
    // Another key in the secret: A's Authorization no longer opens.
    const rotatedAway = { ...vars, ORGANIZATION_SECRETS_KEYS: secretsKeys("k2") };
    const errors = vi.spyOn(console, "error");
    for (const session of [inA, inB])
      await rpc(rotatedAway, (service) => service.endSession({ sessionId: session.id, reason: "signed_out" }));
    expect(pushed).toEqual([{ url: endpoint(b.name), authorization: null }]);
    expect(errors.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual({
      level: "warn",
      event: "outbox_send_failed",
      name: "ConfigError",
      message: "ORGANIZATION_SECRETS_KEYS has no key of a stored secret's kid",
      binding: null,
      organization: a.org,
      provider: a.name,
    });
    const queued = await d1("DB")
      .prepare("SELECT attempts FROM ssf_queued_sets WHERE stream_id = ?")
      .bind(`provider:${a.org}:${a.name}`)
      .all();
    expect(queued.results).toEqual([{ attempts: 1 }]);
    // The key back: the minute cron sends it, with its Authorization.
    const ctx = createExecutionContext();
    const controller = createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() + 3_600_000 });
    await worker.scheduled(controller, { ...env, ...vars }, ctx);
    await waitOnExecutionContext(ctx);
    expect(pushed.slice(1)).toEqual([{ url: endpoint(a.name), authorization: "Bearer sealed" }]);
  });
  it("sealed for one organization's provider, it opens for no other's: copied into the row of another organization's provider of that name, it holds that one's pushes, logged", async () => {
    const { vars: transmitting } = await transmitter();
    const { vars, key, a } = await twoOrganizations({}, { ...transmitting, ORGANIZATION_SECRETS_KEYS: secretsKeys() });
    const push = (host: string) => ({ endpoint_url: `https://${host}.example/ssf/push`, events: ["session-revoked"] });
    const path = `/admin/organizations/${a.org}/providers/${a.name}`;
    expect((await admin(vars, key, "PATCH", path, { push: push("a"), authorization: "Bearer of-a" })).status).toBe(200);
    const sealed = await storedAuthorization(a.name);
    expect((await admin(vars, key, "DELETE", path)).status).toBe(200);
    const c = await takenByAnother(vars, key, a.name, push("c"));
    // Someone with write access to DB copies A's sealed Authorization into C's row of the same name.
    await expectSealedRefused(vars, c, a.name, sealed);
  });

  it("one sealed before it named its organization is refused, logged with what to do, its SETs held", async () => {
    const { vars: transmitting } = await transmitter();
    const sealing = secretsKeys();
    const { vars, key, a } = await twoOrganizations({}, { ...transmitting, ORGANIZATION_SECRETS_KEYS: sealing });
    const patched = await admin(vars, key, "PATCH", `/admin/organizations/${a.org}/providers/${a.name}`, {
      push: { endpoint_url: "https://a.example/ssf/push", events: ["session-revoked"] },
      authorization: "Bearer of-a",
    });
    expect(patched.status).toBe(200);
    // As this provider's secret was sealed before: bound to its name alone.
    const [jwk] = JSON.parse(sealing) as [{ k: string }];
    const secretKey = Uint8Array.from(atob(jwk.k.replaceAll("-", "+").replaceAll("_", "/")), (c) => c.charCodeAt(0));
    const earlier = await new CompactEncrypt(new TextEncoder().encode("Bearer of-a"))
      .setProtectedHeader({ alg: "dir", enc: "A256GCM", kid: "k1", sub: a.name })
      .encrypt(secretKey);
    await expectSealedRefused(vars, a.org, a.name, earlier);
  });
});

describe("a provider whose stored entry today's validator refuses", () => {
  it("holds back its own SETs alone, with one line naming it; every other provider's are delivered", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    vi.setSystemTime(start);
    const { vars: transmitting } = await transmitter();
    const { vars, key, a, b } = await twoOrganizations({}, transmitting);
    const endpoint = (name: string) => `https://${name}.example/ssf/push`;
    for (const { org, name } of [a, b]) {
      const changed = await admin(vars, key, "PATCH", `/admin/organizations/${org}/providers/${name}`, {
        push: { endpoint_url: endpoint(name), events: ["session-revoked"] },
      });
      expect(changed.status).toBe(200);
    }
    // Both endpoints down: each sign-out waits, queued.
    const down = recordPushes(503);
    for (const { name } of [a, b]) {
      const session = await signIn(vars, newUser(), name, "alice", `sid-${name}`);
      await rpc(vars, (service) => service.endSession({ sessionId: session.id, reason: "signed_out" }));
    }
    expect(down).toHaveLength(2);
    // A's entry, as an earlier validator took it, is refused by today's; read again past the bound.
    await d1("DB")
      .prepare("UPDATE organization_providers SET config = json_set(config, '$.issuer', 'not a url') WHERE name = ?")
      .bind(a.name)
      .run();
    vi.setSystemTime(start + 31_000);
    // Other tests' providers may have SETs due too: this test's two alone are looked at.
    const pushed = recordPushes(202);
    const errors = vi.spyOn(console, "error");
    const ctx = createExecutionContext();
    const controller = createScheduledController({ cron: "* * * * *", scheduledTime: Date.now() + 3_600_000 });
    await worker.scheduled(controller, { ...env, ...vars }, ctx);
    await waitOnExecutionContext(ctx);
    expect(pushed.filter((url) => url === endpoint(a.name) || url === endpoint(b.name))).toEqual([endpoint(b.name)]);
    expect(await queuedAttempts(b.org, b.name)).toEqual([]);
    expect(await queuedAttempts(a.org, a.name)).toEqual([{ attempts: 2 }]);
    // It acts not at its routes either: the service's fault, a 500 its provider retries, logged.
    const logout = await backchannelLogout(vars, a.name, "alice");
    expect({ status: logout.status, body: await logout.json() }).toEqual({
      status: 500,
      body: { code: "internal_error", message: "Something went wrong on our side. Please try again." },
    });
    const lines = errors.mock.calls
      .map(([line]) => JSON.parse(String(line)))
      .filter((line) => line.organization === a.org || line.organization === b.org);
    expect(lines).toEqual([
      {
        level: "error",
        event: "provider_refused",
        organization: a.org,
        provider: a.name,
        message: "a stored provider breaks a rule: issuer is a URL",
      },
    ]);
  });
});

/** A new organization, registering a provider of `name` (freed by another's removal) with `push`. */
async function takenByAnother(vars: Partial<Env>, key: string, name: string, push: object): Promise<string> {
  const c = await newOrganization("c");
  const taken = await admin(vars, key, "POST", `/admin/organizations/${c}/providers`, entry(name, { push }));
  expect(taken.status).toBe(201);
  return c;
}

/**
 * With `sealed` stored as the push Authorization of `organization`'s provider `name`, a sign-out of
 * one of its sessions is not pushed: its SET waits, and one line says what to do.
 */
async function expectSealedRefused(vars: Partial<Env>, organization: string, name: string, sealed: string) {
  await d1("DB").prepare("UPDATE organization_providers SET authorization = ? WHERE name = ?").bind(sealed, name).run();
  const pushed = recordPushes(202);
  const errors = vi.spyOn(console, "error");
  const session = await signIn(vars, newUser(), name, "alice", `sid-${organization}`);
  await rpc(vars, (service) => service.endSession({ sessionId: session.id, reason: "signed_out" }));
  expect(pushed).toEqual([]);
  expect(errors.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual({
    level: "warn",
    event: "outbox_send_failed",
    name: "ConfigError",
    message: "a stored secret is another's, or sealed before it named its organization: send it again",
    binding: null,
    organization,
    provider: name,
  });
  expect(await queuedAttempts(organization, name)).toEqual([{ attempts: 1 }]);
}

function recordPushes(status: number): string[] {
  const pushed: string[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    pushed.push(new Request(input, init).url);
    return new Response(null, { status });
  });
  return pushed;
}

async function storedAuthorization(name: string): Promise<string> {
  const row = await d1("DB")
    .prepare("SELECT authorization FROM organization_providers WHERE name = ?")
    .bind(name)
    .first<{ authorization: string }>();
  return row?.authorization as string;
}

async function queuedAttempts(organization: string, name: string) {
  const { results } = await d1("DB")
    .prepare("SELECT attempts FROM ssf_queued_sets WHERE stream_id = ?")
    .bind(`provider:${organization}:${name}`)
    .all();
  return results;
}
