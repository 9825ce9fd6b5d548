import { env } from "cloudflare:workers";
import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openShards } from "../src/db/shards.ts";
import { revokeReceiverCredential } from "../src/services/ssf/receivers.ts";
import { callWith, d1, expectError, expectSecurityHeaders } from "./helpers.ts";
import { ISSUER, newReceiver, ssfCall, transmitter } from "./ssf.ts";

// The Shared Signals stream management API (SSF 1.0 §8) and poll (RFC 8936), as a receiver
// holding an operator-issued credential sees them.

const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";
const SUPPORTED = [`${CAEP}session-established`, `${CAEP}session-revoked`, `${CAEP}assurance-level-change`];
const VERIFICATION = "https://schemas.openid.net/secevent/ssf/event-type/verification";
const PUSH = "urn:ietf:rfc:8935";
const POLL = "urn:ietf:rfc:8936";
const AUDIENCE = "https://receiver.example";
const CHALLENGE = 'Bearer realm="auth"';
const REJECTED = 'Bearer realm="auth", error="invalid_token"';

afterEach(() => {
  vi.useRealTimers();
});

async function setUp(extra: Partial<Env> = {}) {
  const { key, vars } = await transmitter(extra);
  const receiver = await newReceiver(AUDIENCE);
  const as = (method: string, path: string, body?: unknown, credential: string | null = receiver.credential) =>
    ssfCall(vars, credential, method, path, body);
  return { key, vars, receiver, as };
}

async function created(as: Awaited<ReturnType<typeof setUp>>["as"], body: unknown = {}) {
  const response = await as("POST", "/ssf/streams", body);
  expect(response.status).toBe(201);
  return (await response.json()) as { stream_id: string } & Record<string, unknown>;
}

const queued = async (streamId: string) =>
  (
    await d1("DB").prepare("SELECT jti FROM ssf_queued_sets WHERE stream_id = ? ORDER BY jti").bind(streamId).all()
  ).results.map((row) => row.jti);

describe("creating and reading streams", () => {
  it("creates a poll stream by default, with every supported event, and shows it back", async () => {
    const { as } = await setUp();
    const response = await as("POST", "/ssf/streams", {});
    expect(response.status).toBe(201);
    expect(response.headers.get("Cache-Control")).toBe("no-store");
    expectSecurityHeaders(response);
    const stream = (await response.json()) as { stream_id: string };
    expect(stream.stream_id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(stream).toEqual({
      stream_id: stream.stream_id,
      iss: ISSUER,
      aud: AUDIENCE,
      events_supported: SUPPORTED,
      events_requested: SUPPORTED,
      events_delivered: SUPPORTED,
      delivery: { method: POLL, endpoint_url: `${ISSUER}/ssf/streams/poll/${stream.stream_id}` },
      min_verification_interval: 30,
    });
    expect(await (await as("GET", `/ssf/streams?stream_id=${stream.stream_id}`)).json()).toEqual(stream);
    expect(await (await as("GET", "/ssf/streams")).json()).toEqual([stream]);
  });

  it("delivers only what it supports of what was asked, and keeps the request as asked", async () => {
    const { as } = await setUp();
    const stream = await created(as, {
      events_requested: [`${CAEP}session-revoked`, "https://example.com/unknown", `${CAEP}credential-change`],
      description: "mobile backend",
    });
    expect(stream).toMatchObject({
      events_requested: [`${CAEP}session-revoked`, "https://example.com/unknown", `${CAEP}credential-change`],
      events_delivered: [`${CAEP}session-revoked`],
      description: "mobile backend",
    });
  });

  it("creates a push stream to a public https endpoint and never shows its authorization back", async () => {
    const { as } = await setUp();
    const stream = await created(as, {
      delivery: {
        method: PUSH,
        endpoint_url: "https://receiver.example/events",
        authorization_header: "Bearer s3cr3t",
      },
    });
    expect(stream.delivery).toEqual({ method: PUSH, endpoint_url: "https://receiver.example/events" });
    expect(JSON.stringify(stream)).not.toContain("s3cr3t");
  });

  it("refuses a push endpoint that is not https on a public host, unless SSF_ALLOW_PRIVATE_PUSH", async () => {
    const { as } = await setUp();
    for (const endpoint_url of [
      "http://receiver.example/events",
      "https://localhost/events",
      "https://api.localhost/events",
      "https://127.0.0.1/events",
      "https://10.1.2.3/events",
      "https://172.20.0.1/events",
      "https://192.168.1.1/events",
      "https://169.254.169.254/latest/meta-data",
      "https://100.64.0.1/events",
      "https://0.0.0.0/events",
      "https://[::1]/events",
      "https://[fd00::1]/events",
      "https://[fe80::1]/events",
      "https://[::ffff:127.0.0.1]/events",
      "https://metadata.google.internal/computeMetadata",
      "https://printer.local/events",
      "https://intranet/events",
      "https://user:pass@receiver.example/events",
      "ftp://receiver.example/events",
      "not a url",
      42,
    ]) {
      await expectError(
        await as("POST", "/ssf/streams", { delivery: { method: PUSH, endpoint_url } }),
        400,
        "invalid_delivery",
      );
    }
    await expectError(
      await as("POST", "/ssf/streams", { delivery: { method: "urn:example:carrier-pigeon" } }),
      400,
      "invalid_delivery",
    );
    expect(await (await as("GET", "/ssf/streams")).json()).toEqual([]);

    const dev = await setUp({ SSF_ALLOW_PRIVATE_PUSH: "true" });
    const local = await created(dev.as, { delivery: { method: PUSH, endpoint_url: "http://127.0.0.1:9999/events" } });
    expect(local.delivery).toEqual({ method: PUSH, endpoint_url: "http://127.0.0.1:9999/events" });
  });

  it("gives a receiver ten streams, then 403 stream_limit_reached", async () => {
    const { as } = await setUp();
    for (let i = 0; i < 10; i++) await created(as);
    await expectError(await as("POST", "/ssf/streams", {}), 403, "stream_limit_reached");
    expect(await (await as("GET", "/ssf/streams")).json()).toHaveLength(10);
  });
});

describe("each receiver sees and changes only its own streams", () => {
  it("answers 404 stream_not_found for another receiver's stream, and changes nothing", async () => {
    const { as, vars } = await setUp();
    const stream = await created(as);
    const other = await newReceiver("https://other.example");
    const asOther = (method: string, path: string, body?: unknown) =>
      ssfCall(vars, other.credential, method, path, body);
    const id = stream.stream_id;
    expect(await (await asOther("GET", "/ssf/streams")).json()).toEqual([]);
    for (const [method, path, body] of [
      ["GET", `/ssf/streams?stream_id=${id}`, undefined],
      ["PATCH", "/ssf/streams", { stream_id: id, description: "mine now" }],
      ["PUT", "/ssf/streams", { stream_id: id }],
      ["DELETE", `/ssf/streams?stream_id=${id}`, undefined],
      ["GET", `/ssf/streams/status?stream_id=${id}`, undefined],
      ["POST", "/ssf/streams/status", { stream_id: id, status: "disabled" }],
      ["POST", "/ssf/streams/subjects/add", { stream_id: id, subject: { format: "opaque", id: "u1" } }],
      ["POST", "/ssf/streams/subjects/remove", { stream_id: id, subject: { format: "opaque", id: "u1" } }],
      ["POST", "/ssf/streams/verify", { stream_id: id }],
      ["POST", `/ssf/streams/poll/${id}`, {}],
    ] as const) {
      await expectError(await asOther(method, path, body), 404, "stream_not_found");
    }
    expect(await (await as("GET", `/ssf/streams?stream_id=${id}`)).json()).toEqual(stream);
    expect(await queued(id)).toEqual([]);
  });

  it("refuses a missing, malformed, unknown or revoked credential with 401, and changes nothing", async () => {
    const { as, receiver } = await setUp();
    const stream = await created(as);
    await expectError(await as("GET", "/ssf/streams", undefined, null), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
    for (const credential of ["nonsense", `${receiver.id}.${"A".repeat(43)}`]) {
      await expectError(await as("GET", "/ssf/streams", undefined, credential), 401, "invalid_token", {
        wwwAuthenticate: REJECTED,
      });
    }
    expect(await revokeReceiverCredential(openShards(env), receiver.id, new Date())).toEqual({
      revoked: true,
      streams: 1,
    });
    for (const [method, path, body] of [
      ["GET", "/ssf/streams", undefined],
      ["POST", "/ssf/streams", {}],
      ["POST", "/ssf/streams/status", { stream_id: stream.stream_id, status: "enabled" }],
    ] as const) {
      await expectError(await as(method, path, body), 401, "invalid_token", { wwwAuthenticate: REJECTED });
    }
    const row = await d1("DB")
      .prepare("SELECT status, reason FROM ssf_streams WHERE id = ?")
      .bind(stream.stream_id)
      .first();
    expect(row).toEqual({ status: "disabled", reason: "receiver credential revoked" });
  });
});

describe("updating, replacing and deleting", () => {
  it("PATCH changes what it names and keeps the rest; PUT deletes what it leaves out", async () => {
    const { as } = await setUp();
    const stream = await created(as, { description: "first", events_requested: [`${CAEP}session-revoked`] });
    const patched = await as("PATCH", "/ssf/streams", { stream_id: stream.stream_id, description: "second" });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toEqual({ ...stream, description: "second" });

    const replaced = await as("PUT", "/ssf/streams", {
      stream_id: stream.stream_id,
      delivery: { method: PUSH, endpoint_url: "https://receiver.example/in" },
    });
    expect(replaced.status).toBe(200);
    const { description: _, ...withoutDescription } = stream;
    expect(await replaced.json()).toEqual({
      ...withoutDescription,
      events_requested: SUPPORTED,
      events_delivered: SUPPORTED,
      delivery: { method: PUSH, endpoint_url: "https://receiver.example/in" },
    });
  });

  it("refuses transmitter-supplied properties that do not match, and changes nothing", async () => {
    const { as } = await setUp();
    const stream = await created(as, { events_requested: [`${CAEP}session-revoked`] });
    for (const wrong of [
      { aud: "https://someone-else.example" },
      { iss: "https://attacker.example" },
      { events_delivered: SUPPORTED },
      { events_supported: [] },
      { min_verification_interval: 1 },
    ]) {
      await expectError(
        await as("PATCH", "/ssf/streams", { stream_id: stream.stream_id, description: "x", ...wrong }),
        400,
        "invalid_request_body",
      );
    }
    const same = await as("PATCH", "/ssf/streams", {
      ...stream,
      description: "matching echoes are fine",
    });
    expect(await same.json()).toEqual({ ...stream, description: "matching echoes are fine" });
  });

  it("DELETE answers 204, then the stream is gone: 404", async () => {
    const { as } = await setUp();
    const stream = await created(as);
    await as("POST", "/ssf/streams/verify", { stream_id: stream.stream_id });
    const deleted = await as("DELETE", `/ssf/streams?stream_id=${stream.stream_id}`);
    expect(deleted.status).toBe(204);
    expect(await deleted.text()).toBe("");
    expect(deleted.headers.get("Cache-Control")).toBe("no-store");
    await expectError(await as("GET", `/ssf/streams?stream_id=${stream.stream_id}`), 404, "stream_not_found");
    await expectError(await as("DELETE", `/ssf/streams?stream_id=${stream.stream_id}`), 404, "stream_not_found");
    expect(await queued(stream.stream_id)).toEqual([]);
    await expectError(await as("DELETE", "/ssf/streams"), 400, "stream_id_required");
  });
});

describe("status", () => {
  it("reads and sets enabled, paused and disabled with a reason; disabling drops what waits", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    expect(await (await as("GET", `/ssf/streams/status?stream_id=${stream_id}`)).json()).toEqual({
      stream_id,
      status: "enabled",
    });
    await as("POST", "/ssf/streams/verify", { stream_id });
    const paused = await as("POST", "/ssf/streams/status", { stream_id, status: "paused", reason: "maintenance" });
    expect(paused.status).toBe(200);
    expect(await paused.json()).toEqual({ stream_id, status: "paused", reason: "maintenance" });
    expect(await queued(stream_id)).toHaveLength(1);
    expect(await (await as("POST", "/ssf/streams/status", { stream_id, status: "disabled" })).json()).toEqual({
      stream_id,
      status: "disabled",
    });
    expect(await queued(stream_id)).toEqual([]);
    await expectError(
      await as("POST", "/ssf/streams/status", { stream_id, status: "off" }),
      400,
      "invalid_request_body",
    );
    await expectError(await as("GET", "/ssf/streams/status"), 400, "stream_id_required");
  });
});

describe("subjects", () => {
  it("adds (200, empty) and removes (204) a user named by iss_sub, opaque or complex", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    for (const subject of [
      { format: "iss_sub", iss: ISSUER, sub: "user-1" },
      { format: "opaque", id: "user-2" },
      { format: "complex", user: { format: "opaque", id: "user-3" } },
    ]) {
      const added = await as("POST", "/ssf/streams/subjects/add", { stream_id, subject, verified: true });
      expect([added.status, await added.text()]).toEqual([200, ""]);
      const removed = await as("POST", "/ssf/streams/subjects/remove", { stream_id, subject });
      expect([removed.status, await removed.text()]).toEqual([204, ""]);
    }
    const rows = await d1("DB")
      .prepare("SELECT user_id, included FROM ssf_stream_subjects WHERE stream_id = ? ORDER BY user_id")
      .bind(stream_id)
      .all();
    expect(rows.results).toEqual([
      { user_id: "user-1", included: 0 },
      { user_id: "user-2", included: 0 },
      { user_id: "user-3", included: 0 },
    ]);
  });

  it("refuses a subject that names no user of this transmitter: 400 invalid_subject", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    for (const subject of [
      { format: "iss_sub", iss: "https://elsewhere.example", sub: "user-1" },
      { format: "email", email: "someone@example.com" },
      { format: "opaque", id: "" },
      { format: "opaque", id: " padded" },
      { format: "complex", session: { format: "opaque", id: "s" } },
      { format: "complex", user: { format: "complex", user: { format: "opaque", id: "u" } } },
      "user-1",
      null,
    ]) {
      await expectError(await as("POST", "/ssf/streams/subjects/add", { stream_id, subject }), 400, "invalid_subject");
    }
  });
});

describe("verification and poll", () => {
  it("queues a verification SET echoing state; poll hands it out signed, ack forgets it", async () => {
    const { as, vars } = await setUp();
    const { stream_id } = await created(as);
    const verify = await as("POST", "/ssf/streams/verify", { stream_id, state: "opaque-state-1" });
    expect([verify.status, await verify.text()]).toEqual([204, ""]);

    const polled = await as("POST", `/ssf/streams/poll/${stream_id}`, { returnImmediately: true });
    expect(polled.status).toBe(200);
    const { sets, moreAvailable } = (await polled.json()) as { sets: Record<string, string>; moreAvailable: boolean };
    expect(moreAvailable).toBe(false);
    const [[jti, set]] = Object.entries(sets) as [[string, string]];
    // Verified as a receiver would: the published key set, another JOSE implementation than the signer's.
    const keySet = await (await callWith(vars, "GET", "/ssf/jwks.json")).json();
    const { payload, protectedHeader } = await compactVerify(set, createLocalJWKSet(keySet as JSONWebKeySet));
    expect(protectedHeader).toEqual({ alg: "ES256", kid: "k1", typ: "secevent+jwt" });
    const claims = JSON.parse(new TextDecoder().decode(payload));
    expect(claims).toEqual({
      iss: ISSUER,
      aud: AUDIENCE,
      iat: expect.any(Number),
      jti,
      sub_id: { format: "opaque", id: stream_id },
      events: { [VERIFICATION]: { state: "opaque-state-1" } },
    });

    // Not acknowledged: not handed out again at once.
    expect(await (await as("POST", `/ssf/streams/poll/${stream_id}`, {})).json()).toEqual({
      sets: {},
      moreAvailable: false,
    });
    const acked = await as("POST", `/ssf/streams/poll/${stream_id}`, { ack: [jti], maxEvents: 0 });
    expect(await acked.json()).toEqual({ sets: {}, moreAvailable: false });
    expect(await queued(stream_id)).toEqual([]);
  });

  it("hands an unacknowledged SET out again a minute later, with the same jti", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    await as("POST", "/ssf/streams/verify", { stream_id });
    const first = (await (await as("POST", `/ssf/streams/poll/${stream_id}`, {})).json()) as {
      sets: Record<string, string>;
    };
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 61_000);
    const again = (await (await as("POST", `/ssf/streams/poll/${stream_id}`, {})).json()) as {
      sets: Record<string, string>;
    };
    expect(Object.keys(again.sets)).toEqual(Object.keys(first.sets));
  });

  it("refuses a second verification within 30 s with 429 and Retry-After, and queues nothing", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-25T12:00:00.000Z"));
    await as("POST", "/ssf/streams/verify", { stream_id });
    vi.setSystemTime(new Date("2026-11-25T12:00:10.000Z"));
    await expectError(await as("POST", "/ssf/streams/verify", { stream_id }), 429, "verification_too_frequent", {
      retryAfter: "20",
    });
    expect(await queued(stream_id)).toHaveLength(1);
    vi.setSystemTime(new Date("2026-11-25T12:00:30.000Z"));
    expect((await as("POST", "/ssf/streams/verify", { stream_id })).status).toBe(204);
    expect(await queued(stream_id)).toHaveLength(2);
  });

  it("hands out at most maxEvents, oldest first, and says more are available; a paused stream none", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    for (let i = 0; i < 3; i++) {
      vi.setSystemTime(start + i * 31_000);
      expect((await as("POST", "/ssf/streams/verify", { stream_id, state: `s${i}` })).status).toBe(204);
    }
    const all = await queued(stream_id);
    await as("POST", "/ssf/streams/status", { stream_id, status: "paused" });
    expect(await (await as("POST", `/ssf/streams/poll/${stream_id}`, {})).json()).toEqual({
      sets: {},
      moreAvailable: false,
    });
    await as("POST", "/ssf/streams/status", { stream_id, status: "enabled" });
    const page = (await (await as("POST", `/ssf/streams/poll/${stream_id}`, { maxEvents: 2 })).json()) as {
      sets: Record<string, string>;
      moreAvailable: boolean;
    };
    expect(Object.keys(page.sets)).toEqual(all.slice(0, 2));
    expect(page.moreAvailable).toBe(true);
  });

  it("forgets SETs the receiver refused (setErrs), logging only their jti and code", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    await as("POST", "/ssf/streams/verify", { stream_id });
    const [jti] = await queued(stream_id);
    const lines: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: string) => lines.push(line));
    const response = await as("POST", `/ssf/streams/poll/${stream_id}`, {
      maxEvents: 0,
      setErrs: { [jti as string]: { err: "invalid_state", description: "secret-looking description" } },
    });
    expect(await response.json()).toEqual({ sets: {}, moreAvailable: false });
    expect(await queued(stream_id)).toEqual([]);
    expect(lines.map((line) => JSON.parse(line))).toContainEqual({
      level: "warn",
      event: "ssf_set_refused",
      stream: stream_id,
      jti,
      err: "invalid_state",
    });
    expect(lines.join("\n")).not.toContain("secret-looking");
    vi.restoreAllMocks();
  });

  it("a push stream has no poll endpoint: 404, and its SETs stay", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as, {
      delivery: { method: PUSH, endpoint_url: "https://receiver.example/in" },
    });
    await as("POST", "/ssf/streams/verify", { stream_id });
    const waiting = await queued(stream_id);
    await expectError(await as("POST", `/ssf/streams/poll/${stream_id}`, { ack: waiting }), 404, "stream_not_found");
    expect(await queued(stream_id)).toEqual(waiting);
  });
});

describe("bad input: a clear 4xx, nothing changed", () => {
  it("refuses bodies that are not JSON objects of valid members", async () => {
    const { as } = await setUp();
    const { stream_id } = await created(as);
    for (const body of [
      "not json",
      "[]",
      "null",
      { events_requested: "all" },
      { events_requested: [1] },
      { events_requested: Array.from({ length: 33 }, (_, i) => `https://example.com/${i}`) },
      { description: "x".repeat(257) },
    ]) {
      await expectError(await as("POST", "/ssf/streams", body), 400, "invalid_request_body");
    }
    for (const body of [{}, { stream_id: 1 }, { stream_id: "" }]) {
      await expectError(await as("PATCH", "/ssf/streams", body), 400, "invalid_request_body");
    }
    for (const body of [
      { maxEvents: -1 },
      { maxEvents: 1.5 },
      { ack: "x" },
      { returnImmediately: "yes" },
      { setErrs: [] },
    ]) {
      await expectError(await as("POST", `/ssf/streams/poll/${stream_id}`, body), 400, "invalid_request_body");
    }
    await expectError(await as("POST", "/ssf/streams", { description: "x".repeat(20_000) }), 413, "body_too_large");
    expect(await (await as("GET", "/ssf/streams")).json()).toHaveLength(1);
  });

  it("answers 404 not_found without a transmitter, and 405 with Allow for other methods", async () => {
    const { receiver } = await setUp();
    await expectError(await ssfCall({ SSF_ISSUER: "" }, receiver.credential, "GET", "/ssf/streams"), 404, "not_found");
    const { as } = await setUp();
    await expectError(await as("GET", "/ssf/streams/verify"), 405, "method_not_allowed", { allow: "POST" });
    await expectError(await as("DELETE", "/ssf/streams/status"), 405, "method_not_allowed", {
      allow: "GET, HEAD, POST",
    });
  });
});
