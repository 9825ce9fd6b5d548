import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  bearer,
  CLEARED_COOKIE,
  call,
  callWith,
  expectError,
  FAILURE_LIMIT,
  FIREFOX_WINDOWS,
  insideOneLimiterWindow,
  isLive,
  issue,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
} from "./helpers.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

const UNKNOWN = `${"A".repeat(24)}.${"B".repeat(43)}`;

/** More than any test below takes, on a loaded CI machine. */
const TEST_MS = 8_000;

describe("rate limiting of failed authentications (per client IP)", () => {
  beforeEach(() => insideOneLimiterWindow(TEST_MS), TEST_MS + 5_000);

  it("answers 429 with Retry-After in the error shape once an IP is over the limit", async () => {
    const ip = "198.51.100.200";
    for (let i = 0; i < FAILURE_LIMIT; i++) {
      expect((await call("GET", "/auth/sessions", { ...bearer(UNKNOWN), "CF-Connecting-IP": ip })).status).toBe(401);
    }
    for (const [method, path, headers] of [
      ["GET", "/auth/sessions", bearer(UNKNOWN)],
      ["DELETE", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA", bearer(UNKNOWN)],
      ["POST", "/auth/logout", { Authorization: "Bearer malformed" }],
      ["DELETE", "/auth/logout", bearer(UNKNOWN)],
      ["GET", "/auth/events", bearer(UNKNOWN)],
    ] as const) {
      const response = await call(method, path, { ...headers, "CF-Connecting-IP": ip });
      expect(response.headers.get("Retry-After")).toBe("60");
      await expectError(response, 429, "rate_limited");
    }
  });

  it("never slows successful requests, even from an IP that is over the limit", async () => {
    const ip = "198.51.100.201";
    const session = await issue(newUser());
    for (let i = 0; i <= FAILURE_LIMIT; i++)
      await call("POST", "/auth/logout", { ...bearer(UNKNOWN), "CF-Connecting-IP": ip });
    expect((await call("POST", "/auth/logout", { ...bearer(UNKNOWN), "CF-Connecting-IP": ip })).status).toBe(429);
    expect((await call("GET", "/auth/sessions", { ...bearer(session.token), "CF-Connecting-IP": ip })).status).toBe(
      200,
    );
    expect(
      (await call("POST", "/auth/logout", { ...sessionCookie(session.token), "CF-Connecting-IP": ip })).status,
    ).toBe(200);
    expect(await isLive(session.token)).toBe(false);
  });

  it("one IP's failures never touch another's", async () => {
    for (let i = 0; i <= FAILURE_LIMIT; i++)
      await call("GET", "/auth/sessions", { ...bearer(UNKNOWN), "CF-Connecting-IP": "198.51.100.202" });
    const response = await call("GET", "/auth/sessions", { ...bearer(UNKNOWN), "CF-Connecting-IP": "198.51.100.203" });
    expect(response.status).toBe(401);
  });

  it("does not count requests that presented no token, nor refusals of an authenticated caller", async () => {
    const ip = "198.51.100.204";
    const session = await issue(newUser());
    for (let i = 0; i <= FAILURE_LIMIT; i++) {
      expect((await call("GET", "/auth/sessions", { "CF-Connecting-IP": ip })).status).toBe(401);
      expect(
        (
          await call("DELETE", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA", {
            ...bearer(session.token),
            "CF-Connecting-IP": ip,
          })
        ).status,
      ).toBe(401);
    }
    expect((await call("GET", "/auth/sessions", { ...bearer(UNKNOWN), "CF-Connecting-IP": ip })).status).toBe(401);
  });

  it("does not count a held session's 401 reauthentication_required: its token is live, and it can still leave", async () => {
    const ip = "198.51.100.207";
    const session = await issue(newUser(), { carrier: "cookie" });
    const cookie = { ...sessionCookie(session.token), "CF-Connecting-IP": ip };
    const challenge =
      'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';
    // Its cookie from another browser family holds it (SESSION_CONTEXT_DEVICE = hold, the default).
    const copied = await call("GET", "/auth/sessions", { ...cookie, "User-Agent": FIREFOX_WINDOWS });
    await expectError(copied, 401, "reauthentication_required", { wwwAuthenticate: challenge });
    // More held refusals from this address than the limit allows failures, on each route that holds it.
    for (let i = 0; i <= FAILURE_LIMIT; i++) {
      const [method, path] = (
        [
          ["GET", "/auth/sessions"],
          ["GET", "/auth/events"],
          ["DELETE", "/auth/logout"],
        ] as const
      )[i % 3] as readonly [string, string];
      await expectError(await call(method, path, cookie), 401, "reauthentication_required", {
        wwwAuthenticate: challenge,
      });
    }
    // None was counted: this address's first refused token is a 401, not a 429.
    await expectError(
      await call("GET", "/auth/sessions", { ...bearer(UNKNOWN), "CF-Connecting-IP": ip }),
      401,
      "invalid_token",
      { wwwAuthenticate: REJECTED_CHALLENGE },
    );
    expect(await isLive(session.token)).toBe(true);
    expect((await call("POST", "/auth/logout", cookie)).status).toBe(200);
    expect(await isLive(session.token)).toBe(false);
  });

  it("a 429 for a dead cookie still clears it, once, and carries no 401 challenge", async () => {
    const ip = "198.51.100.205";
    for (let i = 0; i < FAILURE_LIMIT; i++)
      await call("DELETE", "/auth/logout", { ...sessionCookie(UNKNOWN), "CF-Connecting-IP": ip });
    const response = await call("DELETE", "/auth/logout", { ...sessionCookie(UNKNOWN), "CF-Connecting-IP": ip });
    expect(response.headers.getSetCookie()).toEqual([CLEARED_COOKIE]);
    await expectError(response, 429, "rate_limited", { setCookie: CLEARED_COOKIE });
  });

  it("a 429 to an allowed front-end origin is readable by it (CORS)", async () => {
    const ip = "198.51.100.206";
    const headers = { ...bearer(UNKNOWN), "CF-Connecting-IP": ip, Origin: "https://app.example" };
    for (let i = 0; i < FAILURE_LIMIT; i++)
      await callWith({ ALLOWED_ORIGINS: "https://app.example" }, "GET", "/auth/sessions", headers);
    const response = await callWith({ ALLOWED_ORIGINS: "https://app.example" }, "GET", "/auth/sessions", headers);
    expect(response.status).toBe(429);
    expect(response.headers.get("Access-Control-Allow-Origin")).toBe("https://app.example");
    expect(response.headers.get("Access-Control-Expose-Headers")).toBe("WWW-Authenticate,Retry-After");
  });
});

describe("a limiter outage", () => {
  it("lets the refusal stand (fails open) and says so in a warn line with the error's name", async () => {
    const warned: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => void warned.push(args.map(String).join(" ")));
    const limiter = {
      limit: async () => {
        throw new TypeError("limiter at 10.0.0.1 down");
      },
    } as unknown as RateLimit;
    const response = await callWith({ AUTH_FAILURES: limiter }, "GET", "/auth/sessions", bearer(UNKNOWN));
    expect(response.status).toBe(401);
    expect(warned).toEqual(['{"level":"warn","event":"rate_limiter_unavailable","name":"TypeError"}']);
  });
});
