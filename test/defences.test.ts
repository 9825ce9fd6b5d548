import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { flakyD1, InjectedFailure } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  call,
  callWith,
  d1OfUser,
  expectError,
  expectSecurityHeaders,
  isLive,
  issue,
  newUser,
  ORIGIN,
  sessionCookie,
  wrapShards,
} from "./helpers.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

const FRONT_END = "https://app.example";
const withFrontEnd = { ALLOWED_ORIGINS: `${FRONT_END}/` };

describe("CORS", () => {
  it("is off by default: no CORS headers, a preflight is just an unsupported method", async () => {
    const session = await issue(newUser());
    const response = await call("GET", "/auth/sessions", { ...bearer(session.token), Origin: FRONT_END });
    expect(response.status).toBe(200);
    expect(response.headers.get("Access-Control-Allow-Origin")).toBeNull();
    const preflight = await call("OPTIONS", "/auth/sessions", {
      Origin: FRONT_END,
      "Access-Control-Request-Method": "GET",
      "Access-Control-Request-Headers": "authorization",
    });
    await expectError(preflight, 405, "method_not_allowed", { allow: "GET, HEAD, DELETE" });
    expect(preflight.headers.get("Access-Control-Allow-Origin")).toBeNull();
  });

  it("answers a preflight from an allowed origin, with credentials and Authorization allowed", async () => {
    const preflight = await callWith(withFrontEnd, "OPTIONS", "/auth/sessions", {
      Origin: FRONT_END,
      "Access-Control-Request-Method": "GET",
      "Access-Control-Request-Headers": "authorization",
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("Access-Control-Allow-Origin")).toBe(FRONT_END);
    expect(preflight.headers.get("Access-Control-Allow-Credentials")).toBe("true");
    expect(preflight.headers.get("Access-Control-Allow-Headers")).toBe("Authorization");
    expect(preflight.headers.get("Access-Control-Allow-Methods")).toBe("GET,HEAD,POST,DELETE");
    expect(preflight.headers.get("Vary")).toContain("Origin");
  });

  it("lets an allowed origin read responses, errors included, and log out by cookie", async () => {
    const session = await issue(newUser());
    const denied = await callWith(withFrontEnd, "GET", "/auth/sessions", { Origin: FRONT_END });
    expect(denied.status).toBe(401);
    expect(denied.headers.get("Access-Control-Allow-Origin")).toBe(FRONT_END);
    expect(denied.headers.get("Access-Control-Expose-Headers")).toBe("WWW-Authenticate,Retry-After");
    const loggedOut = await callWith(withFrontEnd, "POST", "/auth/logout", {
      ...sessionCookie(session.token),
      Origin: FRONT_END,
      "Sec-Fetch-Site": "same-site",
    });
    expect(loggedOut.status).toBe(200);
    expect(loggedOut.headers.get("Access-Control-Allow-Credentials")).toBe("true");
    expect(await isLive(session.token)).toBe(false);
  });

  it("gives an origin that is not listed nothing", async () => {
    const response = await callWith(withFrontEnd, "OPTIONS", "/auth/logout", {
      Origin: "https://evil.example",
      "Access-Control-Request-Method": "POST",
    });
    expect(response.status).toBe(405);
    expect(response.headers.get("Access-Control-Allow-Origin")).toBeNull();
  });
});

describe("security headers", () => {
  it("are on successes, errors, 404s and 500s alike", async () => {
    const session = await issue(newUser());
    expectSecurityHeaders(await call("GET", "/auth/sessions", bearer(session.token)));
    expectSecurityHeaders(await call("GET", "/"));
    vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    const failed = await callWith(
      wrapShards((d1) => flakyD1(d1, 99, () => new InjectedFailure("boom")).db),
      "GET",
      "/auth/sessions",
      bearer(session.token),
    );
    expect(failed.status).toBe(500);
    expectSecurityHeaders(failed);
  });
});

describe("transient D1 errors", () => {
  const transient = () => new Error("D1_ERROR: Network connection lost.");

  it("are retried once: the request succeeds on the second try", async () => {
    const user = newUser();
    const session = await issue(user);
    const flaky = flakyD1(await d1OfUser(user), 1, transient);
    const response = await callWith(
      { [await bindingOfUser(user)]: flaky.db },
      "POST",
      "/auth/logout",
      bearer(session.token),
    );
    expect(response.status).toBe(200);
    expect(flaky.roundTrips).toBe(2);
    expect(await isLive(session.token)).toBe(false);
  });

  it("answer 503 service_unavailable when the retry fails too, after exactly two tries", async () => {
    vi.spyOn(console, "warn").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    const user = newUser();
    const session = await issue(user);
    const flaky = flakyD1(await d1OfUser(user), 2, transient);
    const response = await callWith(
      { [await bindingOfUser(user)]: flaky.db },
      "GET",
      "/auth/sessions",
      bearer(session.token),
    );
    expect(response.headers.get("Retry-After")).toBe("1");
    await expectError(response, 503, "service_unavailable");
    expect(flaky.roundTrips).toBe(2);
  });

  it("other errors are not retried", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    const user = newUser();
    const session = await issue(user);
    const flaky = flakyD1(await d1OfUser(user), 1, () => new Error("D1_ERROR: no such table: sessions"));
    await expectError(
      await callWith({ [await bindingOfUser(user)]: flaky.db }, "GET", "/auth/sessions", bearer(session.token)),
      500,
      "internal_error",
    );
    expect(flaky.roundTrips).toBe(1);
  });
});

describe("request log", () => {
  function captureLog() {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    return lines;
  }

  it("writes nothing for ordinary answers, successes and refusals alike", async () => {
    const session = await issue(newUser());
    const lines = captureLog();
    expect((await call("GET", "/auth/sessions", bearer(session.token))).status).toBe(200);
    expect((await call("GET", "/auth/sessions", bearer(`${session.id}.${"x".repeat(43)}`))).status).toBe(401);
    expect((await call("GET", "/auth/logout", bearer(session.token))).status).toBe(405);
    expect((await call("GET", "/secret-looking-path")).status).toBe(404);
    expect((await call("DELETE", "/auth/logout", bearer(session.token))).status).toBe(200);
    expect(lines).toEqual([]);
  });

  it("writes none for a 5xx: its one line is the failure's, with no path, token, secret or hash", async () => {
    const user = newUser();
    const session = await issue(user);
    const [, secret] = session.token.split(".");
    const { results } = await (await d1OfUser(user))
      .prepare("SELECT secret_hash FROM sessions WHERE id = ?")
      .bind(session.id)
      .all<{ secret_hash: string }>();
    const lines = captureLog();
    vi.spyOn(console, "error").mockImplementation((line: unknown) => void lines.push(String(line)));
    // On the database that holds the user: the one the request asks.
    const failing = {
      [await bindingOfUser(user)]: flakyD1(await d1OfUser(user), 99, () => new InjectedFailure("boom")).db,
    };
    await expectError(
      await callWith(failing, "DELETE", `/auth/sessions/${session.id}`, bearer(session.token)),
      500,
      "internal_error",
    );
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      {
        level: "error",
        event: "unhandled_error",
        name: "InjectedFailure",
        message: "boom",
        method: "DELETE",
        route: "/auth/sessions/:id{[^\\x2F]*}",
        binding: await bindingOfUser(user),
        request_id: expect.any(String),
      },
    ]);
    expect(lines[0]).not.toContain(session.id);
    expect(lines[0]).not.toContain(secret);
    expect(lines[0]).not.toContain(results[0]!.secret_hash);
  });

  it("writes one line when a request needed more than one D1 round trip (a retried transient error)", async () => {
    const user = newUser();
    const session = await issue(user);
    const lines = captureLog();
    const flaky = flakyD1(await d1OfUser(user), 1, () => new Error("D1_ERROR: Network connection lost."));
    expect(
      (await callWith({ [await bindingOfUser(user)]: flaky.db }, "POST", "/auth/logout", bearer(session.token))).status,
    ).toBe(200);
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      {
        level: "warn",
        event: "request",
        method: "POST",
        route: "/auth/logout",
        status: 200,
        duration_ms: expect.any(Number),
        session_id: session.id,
        d1_round_trips: 2,
      },
    ]);
    expect(lines[0]).not.toContain(session.token.split(".")[1]);
  });
});

describe("a configuration that would weaken the cookie is refused, not served", () => {
  it("a SESSION_COOKIE_NAME without the __Host- prefix: every request 500 internal_error, one clear log line", async () => {
    const session = await issue(newUser());
    for (const name of ["session", "__Secure-session", "__host-session", "__Host-", ""]) {
      const logged: string[] = [];
      vi.spyOn(console, "error").mockImplementation((line: unknown) => void logged.push(String(line)));
      vi.spyOn(console, "log").mockImplementation((line: unknown) => void logged.push(String(line)));
      const response = await callWith({ SESSION_COOKIE_NAME: name || " " }, "POST", "/auth/logout", {
        Cookie: `${name}=${session.token}`,
      });
      await expectError(response, 500, "internal_error", { cacheControl: "no-store" });
      expect(logged.map((line) => JSON.parse(line))).toEqual([
        {
          level: "error",
          event: "config_error",
          message: "SESSION_COOKIE_NAME must be a cookie name starting with __Host-",
          method: "POST",
          route: "/auth/logout",
          request_id: expect.any(String),
        },
      ]);
      vi.restoreAllMocks();
    }
    expect(await isLive(session.token)).toBe(true);
  });

  it("refused on every call with the same bindings, not only the first: a refused configuration is not kept", async () => {
    // The runtime hands an isolate's calls one bindings object, which the config is parsed once for.
    const bindings = { ...env, SESSION_COOKIE_NAME: "session" };
    for (let i = 0; i < 2; i++) {
      const service = new SessionService(createExecutionContext(), bindings);
      await expect(service.create({ userId: newUser() })).rejects.toThrow(
        "SESSION_COOKIE_NAME must be a cookie name starting with __Host-",
      );
    }
  });

  it("and so does SessionService.create, before it writes anything", async () => {
    const service = new SessionService(createExecutionContext(), { ...env, SESSION_COOKIE_NAME: "session" });
    await expect(service.create({ userId: newUser() })).rejects.toThrow(
      "SESSION_COOKIE_NAME must be a cookie name starting with __Host-",
    );
  });
});

describe("a refused SHARDS is a refused configuration like any other", () => {
  it("every request 500 internal_error with one config_error line naming the var; the RPC rejects", async () => {
    const session = await issue(newUser());
    for (const [shards, message] of [
      ["{", 'SHARDS must be JSON: {region: {"<first>-<last>": binding}}'],
      ['{"default": {"0-4095": "NOPE"}}', "SHARDS names NOPE, which is not a D1 binding of this worker"],
      ['{"default": {"0-4094": "DB"}}', "SHARDS.default: bucket 4095 is not mapped to any database"],
    ] as const) {
      const logged: string[] = [];
      vi.spyOn(console, "error").mockImplementation((line: unknown) => void logged.push(String(line)));
      vi.spyOn(console, "log").mockImplementation((line: unknown) => void logged.push(String(line)));
      await expectError(
        await callWith({ SHARDS: shards }, "GET", "/auth/sessions", bearer(session.token)),
        500,
        "internal_error",
        {
          cacheControl: "no-store",
        },
      );
      expect(logged.map((line) => JSON.parse(line))).toEqual([
        {
          level: "error",
          event: "config_error",
          message,
          method: "GET",
          route: "/auth/sessions",
          request_id: expect.any(String),
        },
      ]);
      vi.restoreAllMocks();
      const service = new SessionService(createExecutionContext(), { ...env, SHARDS: shards });
      await expect(service.create({ userId: newUser() })).rejects.toThrow(message);
      await expect(service.authenticate(session.token)).rejects.toThrow(message);
    }
    expect(await isLive(session.token)).toBe(true);
  });
});

describe("ALLOWED_ORIGINS", () => {
  it("a trailing slash in the var still names the origin browsers send", async () => {
    const session = await issue(newUser());
    const response = await callWith(withFrontEnd, "POST", "/auth/logout", {
      ...sessionCookie(session.token),
      Origin: FRONT_END,
    });
    expect(response.status).toBe(200);
  });

  it("own origin is always allowed", async () => {
    const session = await issue(newUser());
    expect((await call("POST", "/auth/logout", { ...sessionCookie(session.token), Origin: ORIGIN })).status).toBe(200);
  });
});
