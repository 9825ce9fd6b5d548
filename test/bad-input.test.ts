import { describe, expect, it } from "vitest";
import {
  bearer,
  CHALLENGE,
  CLEARED_COOKIE,
  COOKIE_NAME,
  call,
  expectError,
  isLive,
  issue,
  newUser,
  REJECTED_CHALLENGE,
  tableSnapshot,
} from "./helpers.ts";

// Hostile or broken input from an authenticated caller: a clear 4xx and no state change.

const HOSTILE_IDS: Record<string, string> = {
  "SQL injection": encodeURIComponent("' OR '1'='1"),
  "SQL comment and drop": encodeURIComponent("x'; DROP TABLE sessions; --"),
  "LIKE wildcard": "%25",
  "1,000 characters": "A".repeat(1000),
  "1,100 characters": "A".repeat(1100),
  "8,000 characters (just under the path bound)": "A".repeat(8000),
  "encoded slash": "a%2Fb",
  "dot segments": "..%2F..",
  "NUL byte": "%00",
  "non-ASCII": encodeURIComponent("sessión-ü-会話"),
  "broken percent-encoding": "%E0%A4%A",
  quotes: encodeURIComponent(`"'\``),
  "one character short of an id": "A".repeat(21),
};

describe("hostile session ids on DELETE /auth/sessions/:id", () => {
  for (const [name, id] of Object.entries(HOSTILE_IDS)) {
    it(`${name}: 401 not_authorized, nothing deleted`, async () => {
      const user = newUser();
      const caller = await issue(user);
      const other = await issue(user);
      const before = await tableSnapshot();
      await expectError(await call("DELETE", `/auth/sessions/${id}`, bearer(caller.token)), 401, "not_authorized", {
        wwwAuthenticate: CHALLENGE,
      });
      expect(await tableSnapshot()).toEqual(before);
      expect(await isLive(other.token)).toBe(true);
    });
  }
});

describe("oversized input is refused before any parsing or query", () => {
  it("a 9,000-character id (path over 8 KiB): 414 uri_too_long, nothing deleted", async () => {
    const caller = await issue(newUser());
    const before = await tableSnapshot();
    await expectError(
      await call("DELETE", `/auth/sessions/${"A".repeat(9000)}`, bearer(caller.token)),
      414,
      "uri_too_long",
    );
    expect(await tableSnapshot()).toEqual(before);
  });

  it("a 10 KB query string is ignored like any query string: the contract's answers stand", async () => {
    const session = await issue(newUser());
    const query = `?utm=${"q".repeat(10_000)}`;
    expect((await call("GET", `/auth/sessions${query}`, bearer(session.token))).status).toBe(200);
    await expectError(await call("GET", `/auth/sessions${query}`), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
  });

  it("a 17 KB token is malformed: the contract's 401/400, without a lookup, nothing changes", async () => {
    const session = await issue(newUser());
    const before = await tableSnapshot();
    const huge = "A".repeat(17_000);
    await expectError(await call("GET", "/auth/sessions", { Authorization: `Bearer ${huge}` }), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    await expectError(
      await call("POST", "/auth/logout", { Cookie: `__Host-session=${huge}` }),
      400,
      "session_invalid",
      {
        setCookie: CLEARED_COOKIE,
      },
    );
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });

  it("17 KB of other cookies does not get in the way of a Bearer request", async () => {
    const session = await issue(newUser());
    const response = await call("GET", "/auth/sessions", {
      ...bearer(session.token),
      Cookie: `prefs=${"x".repeat(17_000)}`,
    });
    expect(response.status).toBe(200);
  });
});

describe("session cookie values hono's parser would skip are still the session cookie", () => {
  const values: Record<string, string> = {
    backslash: "a\\b",
    quoted: '"abc"',
    "a quote inside": 'x"y',
    "percent-encoded token": "%41%41",
  };
  for (const [name, value] of Object.entries(values)) {
    it(`${name}: malformed, 400 with the cookie cleared; cross-site, 403`, async () => {
      await expectError(
        await call("POST", "/auth/logout", { Cookie: `__Host-session=${value}` }),
        400,
        "session_invalid",
        {
          setCookie: CLEARED_COOKIE,
        },
      );
      await expectError(
        await call("POST", "/auth/logout", { Cookie: `__Host-session=${value}`, "Sec-Fetch-Site": "cross-site" }),
        403,
        "cross_site_request",
      );
    });
  }

  it("two session cookies: neither decides, nothing ends; a second Cookie header is read too", async () => {
    const session = await issue(newUser());
    const planted = await issue(newUser());
    for (const Cookie of [
      `__Host-session=x"y; __Host-session=${session.token}`,
      // Cookie tossing: a sibling subdomain sets `x=a,__Host-session=<its token>` (a comma is
      // no separator to a browser), which is sent before the real cookie.
      `x=a,__Host-session=${planted.token}; __Host-session=${session.token}`,
    ]) {
      for (const method of ["POST", "DELETE"]) {
        await expectError(await call(method, "/auth/logout", { Cookie }), 400, "session_invalid", {
          setCookie: CLEARED_COOKIE,
        });
      }
    }
    expect(await isLive(session.token)).toBe(true);
    expect(await isLive(planted.token)).toBe(true);
    const headers = new Headers([
      ["Cookie", "theme=dark"],
      ["Cookie", `__Host-session=${session.token}`],
    ]);
    expect(headers.get("Cookie")).toBe(`theme=dark, __Host-session=${session.token}`);
    const response = await call("POST", "/auth/logout", { Cookie: headers.get("Cookie")! });
    expect(response.status).toBe(200);
    expect(await isLive(session.token)).toBe(false);
  });
});

describe("hostile headers", () => {
  it("an empty Authorization header counts as no header", async () => {
    await expectError(await call("GET", "/auth/sessions", { Authorization: "" }), 401, "invalid_token", {
      wwwAuthenticate: CHALLENGE,
    });
    await expectError(await call("POST", "/auth/logout", { Authorization: "" }), 401, "token_required", {
      wwwAuthenticate: CHALLENGE,
    });
  });

  it("an 8 KB cookie header with many cookies: 400 and nothing changes", async () => {
    const session = await issue(newUser());
    const before = await tableSnapshot();
    const cookies = Array.from({ length: 400 }, (_, i) => `c${i}=${"x".repeat(16)}`).join("; ");
    const response = await call("POST", "/auth/logout", { Cookie: `${cookies}; ${COOKIE_NAME}=${"y".repeat(2000)}` });
    expect(response.status).toBe(400);
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });

  it("a token that is SQL: malformed, never reaches the database", async () => {
    const before = await tableSnapshot();
    await expectError(
      await call("DELETE", "/auth/logout", { Authorization: "Bearer ' OR 1=1 --" }),
      400,
      "session_invalid",
    );
    expect(await tableSnapshot()).toEqual(before);
  });

  it("a well-formed token whose secret half is another session's id", async () => {
    const a = await issue(newUser());
    const b = await issue(newUser());
    const before = await tableSnapshot();
    const forged = `${a.id}.${b.token.split(".")[1]}`;
    await expectError(await call("DELETE", "/auth/logout", bearer(forged)), 401, "session_invalid", {
      wwwAuthenticate: 'Bearer realm="auth", error="invalid_token"',
    });
    expect(await tableSnapshot()).toEqual(before);
  });

  it("a request body is ignored by logout (no token in bodies)", async () => {
    const session = await issue(newUser());
    const response = await call("POST", "/auth/logout", { "Content-Type": "application/json" });
    expect(response.status).toBe(401);
    expect(await isLive(session.token)).toBe(true);
  });
});
