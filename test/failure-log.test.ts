import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { newAdminKey } from "../src/domain/admin-keys.ts";
import { ConfigError } from "../src/domain/config.ts";
import { BucketMoving, DatabaseUnavailable } from "../src/domain/errors.ts";
import { InvalidInput } from "../src/domain/invalid-input.ts";
import { logLine } from "../src/domain/log.ts";
import { hashSecret } from "../src/domain/token.ts";
import { USER_ID_RULE } from "../src/domain/user-id.ts";
import worker from "../src/index.ts";
import { InternalError, SessionService } from "../src/rpc/session-service.ts";
import { redact } from "../src/services/failure-log.ts";
import { failingD1, faultyD1, flakyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  COOKIE_NAME,
  call,
  callWith,
  d1OfUser,
  expectError,
  FAILURE_LIMIT,
  insideOneLimiterWindow,
  isLive,
  issue,
  newUser,
  sessionCookie,
  shardBindings,
  tableSnapshot,
  wrapShards,
} from "./helpers.ts";
import { ISSUER, newReceiver, ssfCall, transmitter } from "./ssf.ts";

// A locked database is a retryable answer, never a 500; and every 5xx leaves one log line an
// operator can act on (what, where, which database, which request) with nothing secret in it.

afterEach(() => {
  vi.restoreAllMocks();
});

const LOCKED = "D1_ERROR: database is locked: SQLITE_BUSY";
const SNAPSHOT = "D1_ERROR: database is locked: SQLITE_BUSY (extended: SQLITE_BUSY_SNAPSHOT)";

/** Every console line written from here on, whatever the level. */
function captureConsole(): string[] {
  const lines: string[] = [];
  for (const level of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
  }
  return lines;
}

/** A session and every form its secrets take: token, secret half, stored hash, cookie header. */
async function secretsOf(userId = newUser()) {
  const session = await issue(userId);
  const secret = session.token.split(".")[1] as string;
  return {
    userId,
    session,
    secrets: [session.token, secret, await hashSecret(secret), `${COOKIE_NAME}=${session.token}`],
  };
}

function expectNoSecret(lines: string[], secrets: string[]) {
  for (const line of lines) for (const secret of secrets) expect(line).not.toContain(secret);
}

describe("a locked or busy database", () => {
  it("is retried once: a lock that clears answers as usual, in two round trips", async () => {
    const { userId, session } = await secretsOf();
    const locked = flakyD1(await d1OfUser(userId), 1, () => new Error(LOCKED));
    const response = await callWith(
      { [await bindingOfUser(userId)]: locked.db },
      "GET",
      "/auth/sessions",
      bearer(session.token),
    );
    expect(response.status).toBe(200);
    expect(locked.roundTrips).toBe(2);
  });

  it("that stays locked answers 503 service_unavailable with Retry-After, never 500, and changes nothing", async () => {
    const { userId, session } = await secretsOf();
    const before = await tableSnapshot();
    for (const message of [LOCKED, SNAPSHOT, "D1_ERROR: database table is locked: SQLITE_LOCKED"]) {
      const locked = faultyD1(await d1OfUser(userId), ["before", "before"], message);
      const response = await callWith(
        { [await bindingOfUser(userId)]: locked.db },
        "DELETE",
        "/auth/logout",
        sessionCookie(session.token),
      );
      await expectError(response, 503, "service_unavailable", { retryAfter: "1" });
      expect(locked.roundTrips).toBe(2);
    }
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });

  it("is DatabaseUnavailable for RPC callers", async () => {
    const { userId, session } = await secretsOf();
    const locked = failingD1(await d1OfUser(userId), LOCKED);
    const service = new SessionService(createExecutionContext(), {
      ...env,
      [await bindingOfUser(userId)]: locked,
    } as Env);
    await expect(service.authenticate(session.token)).rejects.toBeInstanceOf(DatabaseUnavailable);
  });
});

describe("the log line of an unexpected error", () => {
  it("says what failed, on which route, database and request, with every secret redacted", async () => {
    const { userId, session, secrets } = await secretsOf();
    const [token, , hash, cookie] = secrets as [string, string, string, string];
    const binding = await bindingOfUser(userId);
    const lines = captureConsole();
    const failing = failingD1(
      await d1OfUser(userId),
      `D1_ERROR: no such column: secret_hash2 at offset 7: SQLITE_ERROR (${token} ${hash} ${cookie} 'a bound value')`,
    );
    const response = await callWith({ [binding]: failing }, "DELETE", `/auth/sessions/${session.id}`, {
      ...bearer(token),
      "cf-ray": "8f3a2b1c4d5e6f70-FRA",
    });
    await expectError(response, 500, "internal_error");
    const logged = lines.map((line) => JSON.parse(line)).find((line) => line.event === "unhandled_error");
    expect(logged).toEqual({
      level: "error",
      event: "unhandled_error",
      name: "InjectedFailure",
      message:
        "D1_ERROR: no such column: secret_hash2 at offset 7: SQLITE_ERROR ([redacted] [redacted] [redacted] [redacted])",
      method: "DELETE",
      route: "/auth/sessions/:id{[^\\x2F]*}",
      binding,
      request_id: "8f3a2b1c4d5e6f70-FRA",
    });
    expectNoSecret(lines, secrets);
  });

  it("names the RPC method and database; the caller gets an InternalError, never the driver's message", async () => {
    const { userId, session, secrets } = await secretsOf();
    const binding = await bindingOfUser(userId);
    const lines = captureConsole();
    const failing = failingD1(await d1OfUser(userId), `D1_ERROR: disk I/O error: SQLITE_IOERR ${secrets[2]}`);
    const service = new SessionService(createExecutionContext(), { ...env, [binding]: failing } as Env);
    await expect(service.endSession({ sessionId: session.id, reason: "admin" })).rejects.toThrow(InternalError);
    expect(JSON.parse(lines.at(-1) as string)).toEqual({
      level: "error",
      event: "unhandled_error",
      name: "InjectedFailure",
      message: "D1_ERROR: disk I/O error: SQLITE_IOERR [redacted]",
      rpc: "endSession",
      binding,
      request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expectNoSecret(lines, secrets);
    // Refusals the caller can act on are not an operator's concern: no line.
    const before = lines.length;
    await expect(service.create({ userId: "" })).rejects.toBeInstanceOf(TypeError);
    expect(lines).toHaveLength(before);
  });

  it("redacts tokens, ids, hashes and quoted values, and keeps SQLite's words", () => {
    expect(
      redact(
        "D1_ERROR: UNIQUE constraint failed: sessions.id SQLITE_BUSY_SNAPSHOT sessions_user_id_expires_at_idx " +
          `AAabcdefghijklmnopqrstuv.${"x1".repeat(21)} ${"ab12".repeat(16)} "quoted" 1795560770220`,
      ),
    ).toBe(
      "D1_ERROR: UNIQUE constraint failed: sessions.id SQLITE_BUSY_SNAPSHOT sessions_user_id_expires_at_idx " +
        "[redacted] [redacted] [redacted] 1795560770220",
    );
    expect(redact("x".repeat(1000))).toHaveLength(300);
  });
});

describe("a bug is the service's failure, never the caller's fault", () => {
  // A TypeError thrown under a service call, as a bug's own would be: once a 400 that blamed the
  // caller with the bug's message; now a 500 on every entry point, its line in the operator's log.
  const BUG = "Cannot read properties of undefined (reading 'x')";

  /** The user's database, its first round trip failing with the bug. */
  async function buggy(userId: string): Promise<Partial<Env>> {
    return { [await bindingOfUser(userId)]: flakyD1(await d1OfUser(userId), 1, () => new TypeError(BUG)).db };
  }

  async function lineOf(lines: string[], userId: string, site: Record<string, string>) {
    expect(lines.map((line) => JSON.parse(line)).filter((line) => line.event === "unhandled_error")).toEqual([
      {
        level: "error",
        event: "unhandled_error",
        name: "TypeError",
        message: "Cannot read properties of undefined (reading [redacted])",
        ...site,
        binding: await bindingOfUser(userId),
        request_id: expect.any(String),
      },
    ]);
  }

  it("an HTTP route: 500 internal_error and its line", async () => {
    const { userId, session } = await secretsOf();
    const lines = captureConsole();
    const response = await callWith(await buggy(userId), "GET", "/auth/whoami", bearer(session.token));
    expect(await response.clone().text()).not.toContain("Cannot read");
    await expectError(response, 500, "internal_error");
    await lineOf(lines, userId, { method: "GET", route: "/auth/whoami" });
  });

  it("an admin route: 500 internal_error and its line, never 400 invalid_input", async () => {
    const userId = newUser();
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const before = await tableSnapshot();
    const lines = captureConsole();
    const response = await callWith(
      { ...(await buggy(userId)), ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>,
      "POST",
      "/admin/sessions",
      { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      JSON.stringify({ userId }),
    );
    expect(await response.clone().text()).not.toContain("Cannot read");
    await expectError(response, 500, "internal_error");
    await lineOf(lines, userId, { method: "POST", route: "/admin/sessions" });
    expect(await tableSnapshot()).toEqual(before);
  });

  it("the RPC: an InternalError naming its line's request_id, and the line; bad input is still the caller's TypeError", async () => {
    const userId = newUser();
    const lines = captureConsole();
    const service = new SessionService(createExecutionContext(), { ...env, ...(await buggy(userId)) } as Env);
    const failed = await service.create({ userId }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(InternalError);
    await lineOf(lines, userId, { rpc: "create" });
    const { request_id } = JSON.parse(lines.at(-1) as string);
    expect(String(failed)).toBe(
      `InternalError: The session service failed; its log line has request_id ${request_id}.`,
    );
    await expect(service.create({ userId: "" })).rejects.toThrow(new TypeError(`userId must be ${USER_ID_RULE}`));
    await expect(service.create({ userId, ttlSeconds: 0 })).rejects.toThrow(RangeError);
    expect(lines).toHaveLength(1);
  });

  // An input rule failing on what the database answered (a stored region SHARDS no longer
  // lists): the stored value's fault, never the caller's.
  const STORED = 'region must be one of the configured regions (eu) or absent, not "xx"';
  async function storedFault(userId: string): Promise<Partial<Env>> {
    return { [await bindingOfUser(userId)]: flakyD1(await d1OfUser(userId), 1, () => new InvalidInput(STORED)).db };
  }
  const storedLine = async (userId: string, site: Record<string, string>) => ({
    level: "error",
    event: "unhandled_error",
    name: "InvalidInput",
    message: "region must be one of the configured regions (eu) or absent, not [redacted]",
    ...site,
    binding: await bindingOfUser(userId),
    request_id: expect.any(String),
  });

  it("an input rule refusing a stored value, once the database was asked: the admin API's 500 and its line, never 400", async () => {
    const userId = newUser();
    const { stored, key } = await newAdminKey("login flow", ["sessions:create"], new Date());
    const lines = captureConsole();
    const response = await callWith(
      { ...(await storedFault(userId)), ADMIN_KEYS: JSON.stringify([stored]) } as Partial<Env>,
      "POST",
      "/admin/sessions",
      { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      JSON.stringify({ userId }),
    );
    await expectError(response, 500, "internal_error");
    expect(lines.map((line) => JSON.parse(line)).filter((line) => line.event === "unhandled_error")).toEqual([
      await storedLine(userId, { method: "POST", route: "/admin/sessions" }),
    ]);
  });

  it("the same on the RPC: an InternalError and the line; the caller's own bad input is still its TypeError", async () => {
    const userId = newUser();
    const lines = captureConsole();
    const service = new SessionService(createExecutionContext(), { ...env, ...(await storedFault(userId)) } as Env);
    await expect(service.create({ userId })).rejects.toBeInstanceOf(InternalError);
    expect(lines.map((line) => JSON.parse(line))).toEqual([await storedLine(userId, { rpc: "create" })]);
    await expect(service.create({ userId, region: "xx" })).rejects.toThrow(TypeError);
    expect(lines).toHaveLength(1);
  });
});

describe("one failure, one line, whichever entry point it came through", () => {
  // Each fault planted under the same act, ending a session, asked over HTTP (POST /auth/logout)
  // and over RPC (endSession): every line written is compared, so a second line for the same
  // failure (the request line, one from deeper down) fails the test as surely as a missing one.
  const BUG = "Cannot read properties of undefined (reading 'x')";
  const COOKIE_RULE = "SESSION_COOKIE_NAME must be a cookie name starting with __Host-";

  /** The session's bucket, held by a move (src/db/moves.ts): frozen here, or moved to `binding`. */
  async function moving(userId: string, sessionId: string, state: "frozen" | "moved", binding: string) {
    const db = await d1OfUser(userId);
    const bucket = sessionId.slice(0, -22);
    await db
      .prepare("INSERT INTO bucket_moves (bucket, state, binding, updated_at) VALUES (?, ?, ?, ?)")
      .bind(bucket, state, binding, Date.now())
      .run();
    return { bindings: {}, undo: () => db.prepare("DELETE FROM bucket_moves WHERE bucket = ?").bind(bucket).run() };
  }

  const FAULTS: {
    fault: string;
    plant: (userId: string, sessionId: string) => Promise<{ bindings: Partial<Env>; undo?: () => Promise<unknown> }>;
    line: (userId: string) => Promise<Record<string, unknown>>;
    answer: { status: 500 | 503; code: "internal_error" | "service_unavailable" | "moving"; retryAfter?: string };
    thrown: new (...args: never[]) => Error;
  }[] = [
    {
      fault: "a bug (a TypeError under the database call)",
      plant: async (userId) => ({
        bindings: {
          [await bindingOfUser(userId)]: flakyD1(
            await d1OfUser(userId),
            Number.POSITIVE_INFINITY,
            () => new TypeError(BUG),
          ).db,
        },
      }),
      line: async (userId) => ({
        level: "error",
        event: "unhandled_error",
        name: "TypeError",
        message: "Cannot read properties of undefined (reading [redacted])",
        binding: await bindingOfUser(userId),
      }),
      answer: { status: 500, code: "internal_error" },
      thrown: InternalError,
    },
    {
      fault: "a refused configuration",
      plant: async () => ({ bindings: { SESSION_COOKIE_NAME: "session" } }),
      line: async () => ({ level: "error", event: "config_error", message: COOKIE_RULE }),
      answer: { status: 500, code: "internal_error" },
      thrown: ConfigError,
    },
    {
      fault: "an overloaded database",
      plant: async (userId) => ({
        bindings: {
          [await bindingOfUser(userId)]: faultyD1(
            await d1OfUser(userId),
            ["before"],
            "D1_ERROR: D1 DB is overloaded. Too many requests queued.",
          ).db,
        },
      }),
      line: async () => ({ level: "warn", event: "database_unavailable" }),
      answer: { status: 503, code: "service_unavailable", retryAfter: "1" },
      thrown: DatabaseUnavailable,
    },
    {
      fault: "a bucket being moved",
      plant: async (userId, sessionId) => moving(userId, sessionId, "frozen", await bindingOfUser(userId)),
      line: async () => ({ level: "warn", event: "bucket_moving" }),
      answer: { status: 503, code: "moving", retryAfter: "1" },
      thrown: BucketMoving,
    },
    {
      fault: "a bucket moved to a database this worker has no binding for",
      plant: async (userId, sessionId) => moving(userId, sessionId, "moved", "DB_NOT_DEPLOYED"),
      line: async () => ({ level: "error", event: "move_target_unbound", binding: "DB_NOT_DEPLOYED" }),
      answer: { status: 503, code: "moving", retryAfter: "1" },
      thrown: BucketMoving,
    },
  ];

  for (const { fault, plant, line, answer, thrown } of FAULTS) {
    it(`${fault}: one line, the same over HTTP and RPC but for where; the answer and the error its own`, async () => {
      const userId = newUser();
      const session = await issue(userId);
      const lines = captureConsole();
      const planted = async <T>(act: (bindings: Partial<Env>) => Promise<T>): Promise<T> => {
        const { bindings, undo } = await plant(userId, session.id);
        try {
          return await act(bindings);
        } finally {
          await undo?.();
        }
      };
      const response = await planted((bindings) =>
        callWith(bindings, "POST", "/auth/logout", sessionCookie(session.token)),
      );
      await expectError(response, answer.status, answer.code, { retryAfter: answer.retryAfter ?? null });
      const expected = await line(userId);
      const request_id = expect.any(String);
      expect(lines.map((logged) => JSON.parse(logged))).toEqual([
        { ...expected, method: "POST", route: "/auth/logout", request_id },
      ]);
      lines.length = 0;
      const error = await planted((bindings) =>
        new SessionService(createExecutionContext(), { ...env, ...bindings } as Env)
          .endSession({ sessionId: session.id, reason: "admin" })
          .then(
            () => null,
            (thrownError: unknown) => thrownError,
          ),
      );
      expect(error).toBeInstanceOf(thrown);
      expect(lines.map((logged) => JSON.parse(logged))).toEqual([{ ...expected, rpc: "endSession", request_id }]);
      expect(await isLive(session.token)).toBe(true);
    });
  }
});

// An identity provider that both pushes SETs and signs logouts, its key inline.
const idp = await generateKeyPair("ES256");
const IDP = "https://idp.example";
const upstream = {
  issuer: IDP,
  name: "idp",
  audience: ISSUER,
  subject: "iss_sub",
  client_id: "sessions-app",
  jwks: { keys: [{ ...(await exportJWK(idp.publicKey)), kid: "idp1" }] },
};
const UPSTREAMS = { SSF_UPSTREAMS: JSON.stringify([upstream]) } as Partial<Env>;
describe("a bug on the identity providers', report, Shared Signals, cron and queue entry points", () => {
  // The same planted bug (a TypeError from every database call), on the entry points the suite above
  // does not reach: never a 4xx, never a silent retry, never the bug's message in an answer.
  const BUG = "Cannot read properties of undefined (reading 'x')";
  const INTERNAL_ERROR = { code: "internal_error", message: "Something went wrong on our side. Please try again." };
  const LINE = {
    level: "error",
    event: "unhandled_error",
    name: "TypeError",
    message: "Cannot read properties of undefined (reading [redacted])",
  };
  const buggyDatabases = () => wrapShards((db) => flakyD1(db, Number.POSITIVE_INFINITY, () => new TypeError(BUG)).db);
  const failures = (lines: string[]) =>
    lines.map((line) => JSON.parse(line)).filter((line) => line.event === "unhandled_error");

  async function expectInternalError(response: Response): Promise<void> {
    const text = await response.text();
    expect(text).not.toContain("Cannot read");
    expect({ status: response.status, body: JSON.parse(text) }).toEqual({ status: 500, body: INTERNAL_ERROR });
    expect(response.headers.get("Content-Type")).toBe("application/json");
  }

  const signed = (claims: Record<string, unknown>, typ: string) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256", kid: "idp1", typ })
      .setIssuer(IDP)
      .setIssuedAt()
      .setJti(crypto.randomUUID())
      .sign(idp.privateKey);

  it("POST /upstreams/:name/backchannel-logout: 500, its line and the provider's record of the use, naming no failure", async () => {
    const subject = `sub-${crypto.randomUUID()}`;
    const token = await signed(
      { sub: subject, aud: "sessions-app", events: { "http://schemas.openid.net/event/backchannel-logout": {} } },
      "logout+jwt",
    );
    const lines = captureConsole();
    const response = await callWith(
      { ...UPSTREAMS, ...buggyDatabases() },
      "POST",
      "/upstreams/idp/backchannel-logout",
      { "Content-Type": "application/x-www-form-urlencoded" },
      new URLSearchParams({ logout_token: token }).toString(),
    );
    await expectInternalError(response);
    // The subject's link and the token's jti claim are asked at once, each on the database its
    // key hashes to: the line names whichever failed first, one of the two.
    const { jti } = decodeJwt(token);
    const asked = [await bindingOfUser(`idp\n${subject}`), await bindingOfUser(`logout\nidp\n${jti}`)];
    const [line] = failures(lines);
    // The failure's one line, then the provider's record of its use, with the status alone.
    expect(lines.map((logged) => JSON.parse(logged))).toEqual([
      {
        ...LINE,
        method: "POST",
        route: "/upstreams/:name/backchannel-logout",
        binding: line?.binding,
        request_id: expect.any(String),
      },
      { level: "info", event: "upstream_call", upstream: "idp", route: "backchannel_logout", status: 500 },
    ]);
    expect(asked).toContain(line?.binding);
  });

  it("POST /upstreams/:name/global-token-revocation: 500 and its line", async () => {
    const jwt = await signed(
      { aud: `${ISSUER}/upstreams/idp/global-token-revocation`, exp: Math.floor(Date.now() / 1000) + 300 },
      "JWT",
    );
    const lines = captureConsole();
    const response = await callWith(
      { ...UPSTREAMS, ...buggyDatabases() },
      "POST",
      "/upstreams/idp/global-token-revocation",
      { Authorization: `Bearer ${jwt}`, "Content-Type": "application/json" },
      JSON.stringify({ sub_id: { format: "iss_sub", iss: IDP, sub: "someone" } }),
    );
    await expectInternalError(response);
    // As the logout's: the JWT's claim and the subject's link at once, the line naming either.
    const asked = [await bindingOfUser(`revocation\nidp\n${decodeJwt(jwt).jti}`), await bindingOfUser("idp\nsomeone")];
    const [line] = failures(lines);
    expect(failures(lines)).toEqual([
      {
        ...LINE,
        method: "POST",
        route: "/upstreams/:name/global-token-revocation",
        binding: line?.binding,
        request_id: expect.any(String),
      },
    ]);
    expect(asked).toContain(line?.binding);
  });

  it("POST /ssf/inbound: 500 and its line, never RFC 8935's 400", async () => {
    const subject = `sub-${newUser()}`;
    const set = await signed(
      {
        aud: ISSUER,
        sub_id: { format: "iss_sub", iss: IDP, sub: subject },
        events: { "https://schemas.openid.net/secevent/risc/event-type/account-disabled": {} },
      },
      "secevent+jwt",
    );
    const lines = captureConsole();
    const response = await callWith(
      { ...UPSTREAMS, ...buggyDatabases() },
      "POST",
      "/ssf/inbound",
      { "Content-Type": "application/secevent+jwt" },
      set,
    );
    await expectInternalError(response);
    expect(failures(lines)).toEqual([
      {
        ...LINE,
        method: "POST",
        route: "/ssf/inbound",
        // Its first call: the provider's subject's link, where `<upstream>\n<subject>` hashes.
        binding: await bindingOfUser(`idp\n${subject}`),
        request_id: expect.any(String),
      },
    ]);
  });

  it("/ssf/streams: 500 and its line, never the receiver's 401", async () => {
    const { vars } = await transmitter();
    const receiver = await newReceiver();
    const lines = captureConsole();
    const response = await ssfCall({ ...vars, ...buggyDatabases() }, receiver.credential, "GET", "/ssf/streams");
    await expectInternalError(response);
    expect(failures(lines)).toEqual([
      { ...LINE, method: "GET", route: "/ssf/streams", binding: "DB", request_id: expect.any(String) },
    ]);
  });

  it("GET and POST /auth/report: 500 and its line, never a refused report token's 404 or 410", async () => {
    const userId = newUser();
    const { reportToken } = await issue(userId);
    expect(reportToken).toEqual(expect.any(String));
    const lines = captureConsole();
    for (const method of ["GET", "POST"]) {
      const response = await callWith(buggyDatabases(), method, "/auth/report", bearer(reportToken as string));
      await expectInternalError(response);
    }
    const site = { binding: await bindingOfUser(userId), request_id: expect.any(String) };
    expect(failures(lines)).toEqual([
      { ...LINE, method: "GET", route: "/auth/report", ...site },
      { ...LINE, method: "POST", route: "/auth/report", ...site },
    ]);
  });

  /** Runs the worker's scheduled handler for `cron` with `bindings`, and what it leaves running. */
  async function runCron(cron: string, bindings: Partial<Env>, scheduledTime = Date.now()): Promise<void> {
    const ctx = createExecutionContext();
    try {
      await worker.scheduled(createScheduledController({ scheduledTime, cron }), { ...env, ...bindings } as Env, ctx);
    } finally {
      await waitOnExecutionContext(ctx);
    }
  }

  it("the minute cron: each database's line, the pushes' line, then the invocation fails", async () => {
    const { vars } = await transmitter();
    const lines = captureConsole();
    await expect(runCron("* * * * *", { ...vars, ...buggyDatabases() })).rejects.toThrow(new TypeError(BUG));
    const site = { cron: "delivery", request_id: expect.any(String) };
    // Every line written: one for each failure, nothing else.
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      // What is pending, on every database in turn; then the pushes due, on the streams' database.
      ...shardBindings().map((binding) => ({ ...LINE, ...site, binding })),
      { ...LINE, ...site, binding: "DB" },
    ]);
  });

  it("a refused configuration on either cron: its one config_error line, then the invocation fails", async () => {
    const message = 'SHARDS must be JSON: {region: {"<first>-<last>": binding}}';
    for (const [cron, job] of [
      ["* * * * *", "delivery"],
      ["17 * * * *", "purge"],
    ] as const) {
      const lines = captureConsole();
      await expect(runCron(cron, { SHARDS: "{" })).rejects.toThrow(new ConfigError(message));
      expect(lines.map((line) => JSON.parse(line))).toEqual([
        { level: "error", event: "config_error", message, cron: job, request_id: expect.any(String) },
      ]);
      vi.restoreAllMocks();
    }
  });

  it("the hourly purge: a line for each database and table it failed on; the others go on, and its line names them", async () => {
    const lines = captureConsole();
    await runCron("17 * * * *", buggyDatabases());
    const logged = lines.map((line) => JSON.parse(line));
    const failed = failures(lines);
    // Sessions, events and remembered inbound SETs: three tables on every database.
    expect(failed).toHaveLength(3 * shardBindings().length);
    for (const line of failed)
      expect(line).toEqual({ ...LINE, cron: "purge", binding: expect.any(String), request_id: expect.any(String) });
    expect([...new Set(failed.map((line) => line.binding))].sort()).toEqual([...shardBindings()].sort());
    const purged = logged.find((line) => line.event === "purge");
    expect({ level: purged.level, complete: purged.complete, failed: [...purged.failed].sort() }).toEqual({
      level: "warn",
      complete: false,
      failed: [...shardBindings()].sort(),
    });
  });

  it("the events queue: a send that throws is logged with its error, and the cron sends it again", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const broken = {
      send: () => Promise.reject(new TypeError(BUG)),
      sendBatch: () => Promise.reject(new TypeError(BUG)),
    } as unknown as Queue;
    const lines = captureConsole();
    const response = await callWith({ SESSION_EVENTS: broken }, "POST", "/auth/logout", sessionCookie(session.token));
    expect(response.status).toBe(200);
    const sendFailed = {
      level: "warn",
      event: "outbox_send_failed",
      name: "TypeError",
      message: "Cannot read properties of undefined (reading [redacted])",
      binding: null,
    };
    const logged = () => lines.map((line) => JSON.parse(line)).filter((line) => line.event === "outbox_send_failed");
    expect(logged()).toEqual([sendFailed]);
    const pending = async () =>
      (
        await (
          await d1OfUser(userId)
        )
          .prepare("SELECT count(*) AS n FROM session_events WHERE user_id = ? AND pending_delivery = 1")
          .bind(userId)
          .first<{ n: number }>()
      )?.n;
    expect(await pending()).toBe(1);
    // The cron, a few minutes on: the queue still throws, logged again; then it takes them.
    const later = Date.now() + 5 * 60_000;
    await runCron("* * * * *", { SESSION_EVENTS: broken }, later);
    expect(logged()).toEqual([sendFailed, sendFailed]);
    expect(await pending()).toBe(1);
    await runCron("* * * * *", { SESSION_EVENTS: env.TEST_EVENTS_QUEUE } as Partial<Env>, later);
    expect(await pending()).toBe(0);
    expect(failures(lines)).toEqual([]);
  });
});

describe("every log line (src/domain/log.ts)", () => {
  it("is one JSON object, level and event first, through its level's console method or the one named", () => {
    const calls: [string, string][] = [];
    for (const method of ["log", "info", "warn", "error", "debug"] as const)
      vi.spyOn(console, method).mockImplementation((line: unknown) => void calls.push([method, String(line)]));
    logLine("info", "purge", { sessions: 2, failed: [] });
    logLine("warn", "bucket_moving");
    logLine("error", "config_error", { message: "m" });
    logLine("warn", "outbox_send_failed", { name: "Error" }, "error");
    expect(calls).toEqual([
      ["log", '{"level":"info","event":"purge","sessions":2,"failed":[]}'],
      ["warn", '{"level":"warn","event":"bucket_moving"}'],
      ["error", '{"level":"error","event":"config_error","message":"m"}'],
      ["error", '{"level":"warn","event":"outbox_send_failed","name":"Error"}'],
    ]);
  });
});

describe("no error path writes a secret to any log line", () => {
  it("400, 401, 403, 404, 405, 414, 429, 503 (unavailable and moving) and 500 (configuration and unexpected)", async () => {
    const { userId, session, secrets } = await secretsOf();
    const binding = await bindingOfUser(userId);
    const dead = await secretsOf();
    await call("DELETE", "/auth/logout", bearer(dead.session.token));
    const allSecrets = [...secrets, ...dead.secrets];
    const lines = captureConsole();
    const cookie = sessionCookie(session.token);
    const deadCookie = sessionCookie(dead.session.token);
    const ip = { "CF-Connecting-IP": "2001:db8:1:2::7" };
    const statuses: number[] = [];
    const send = async (response: Promise<Response>) => statuses.push((await response).status);
    await send(call("GET", "/auth/sessions", bearer(dead.session.token)));
    await send(call("GET", "/auth/sessions", bearer(`${session.token}!`)));
    await send(call("POST", "/auth/logout", deadCookie));
    await send(call("DELETE", "/auth/logout", deadCookie));
    await send(call("POST", "/auth/logout", { ...cookie, "Sec-Fetch-Site": "cross-site" }));
    await send(call("GET", "/auth/nowhere", { ...cookie, ...bearer(session.token) }));
    await send(call("GET", "/auth/logout", cookie));
    await send(call("GET", `/auth/${"x".repeat(9000)}`, bearer(session.token)));
    await insideOneLimiterWindow(8_000);
    for (let i = 0; i <= FAILURE_LIMIT; i++)
      await send(call("GET", "/auth/sessions", { ...bearer(dead.session.token), ...ip }));
    const overloaded = failingD1(await d1OfUser(userId), `D1_ERROR: D1 DB is overloaded. ${session.token}`);
    await send(callWith({ [binding]: overloaded }, "POST", "/auth/logout", cookie));
    // The user's bucket frozen for a move (src/db/moves.ts): writes answer 503 moving.
    const db = await d1OfUser(userId);
    const bucket = session.id.slice(0, -22);
    await db
      .prepare("INSERT INTO bucket_moves (bucket, state, binding, updated_at) VALUES (?, 'frozen', ?, ?)")
      .bind(bucket, binding, Date.now())
      .run();
    await send(call("POST", "/auth/logout", cookie));
    await db.prepare("DELETE FROM bucket_moves WHERE bucket = ?").bind(bucket).run();
    await send(callWith({ SESSION_COOKIE_NAME: "session" }, "POST", "/auth/logout", cookie));
    const failing = failingD1(db, `D1_ERROR: ${allSecrets.join(" ")}`);
    await send(callWith({ [binding]: failing }, "DELETE", "/auth/logout", cookie));
    expect([...new Set(statuses)]).toEqual([401, 400, 403, 404, 405, 414, 429, 503, 500]);
    expect(lines.length).toBeGreaterThan(0);
    expectNoSecret(lines, allSecrets);
    expect(await isLive(session.token)).toBe(true);
  }, 20_000);
});
