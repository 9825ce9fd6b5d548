import { afterEach, describe, expect, it, vi } from "vitest";
import {
  bearer,
  CHALLENGE,
  CLEARED_COOKIE,
  COOKIE_NAME,
  call,
  callWith,
  expectError,
  expectMessage,
  isLive,
  issue,
  newUser,
  ORIGIN,
  REJECTED_CHALLENGE,
  sessionCookie,
  tableSnapshot,
} from "./helpers.ts";
import { deadTokens, MALFORMED_AUTHORIZATION, MALFORMED_COOKIE, NOT_BEARER, tokenExpiringNow } from "./tokens.ts";

// One block per row of the contract's status table, top to bottom. Every refused request
// must also leave the table exactly as it was.

afterEach(() => {
  vi.useRealTimers();
});

async function expectUnchanged(request: () => Promise<void>): Promise<void> {
  const before = await tableSnapshot();
  await request();
  expect(await tableSnapshot()).toEqual(before);
}

const crossSite: Record<string, Record<string, string>> = {
  "Sec-Fetch-Site: cross-site": { "Sec-Fetch-Site": "cross-site" },
  "Sec-Fetch-Site: cross-site with our own Origin": { "Sec-Fetch-Site": "cross-site", Origin: ORIGIN },
  "a foreign Origin": { Origin: "https://evil.example" },
  "a sibling subdomain": { Origin: "https://evil.sessions.example", "Sec-Fetch-Site": "same-site" },
  "Origin: null": { Origin: "null" },
  "our host over http": { Origin: "http://sessions.example" },
};

describe("403 cross_site_request: cookie-only POST or DELETE /auth/logout from another site", () => {
  for (const method of ["POST", "DELETE"]) {
    for (const [name, headers] of Object.entries(crossSite)) {
      it(`${method} with ${name}: 403, session alive, no cookie change`, async () => {
        const user = newUser();
        const session = await issue(user);
        await issue(user);
        await expectUnchanged(async () => {
          await expectError(
            await call(method, "/auth/logout", { ...sessionCookie(session.token), ...headers }),
            403,
            "cross_site_request",
          );
        });
        expect(await isLive(session.token)).toBe(true);
      });
    }

    it(`${method} from another site wins even over a malformed or unknown cookie`, async () => {
      for (const value of ["", "garbage", `${"A".repeat(24)}.${"B".repeat(43)}`]) {
        await expectError(
          await call(method, "/auth/logout", { Cookie: `${COOKIE_NAME}=${value}`, "Sec-Fetch-Site": "cross-site" }),
          403,
          "cross_site_request",
        );
      }
    });

    it(`${method} from an origin in ALLOWED_ORIGINS is allowed`, async () => {
      const session = await issue(newUser());
      const response = await callWith(
        { ALLOWED_ORIGINS: "https://other.example, https://app.example" },
        method,
        "/auth/logout",
        {
          ...sessionCookie(session.token),
          Origin: "https://app.example",
          "Sec-Fetch-Site": "same-site",
        },
      );
      expect(response.status).toBe(200);
      expect(await isLive(session.token)).toBe(false);
    });

    it(`${method} with a Bearer token is not subject to the check`, async () => {
      const session = await issue(newUser());
      const response = await call(method, "/auth/logout", {
        ...bearer(session.token),
        Origin: "https://evil.example",
        "Sec-Fetch-Site": "cross-site",
      });
      expect(response.status).toBe(200);
      expect(await isLive(session.token)).toBe(false);
    });
  }
});

// The same defence for the operations that take the cookie beside Bearer.
describe("403 cross_site_request: the list, a delete and the events by cookie from another site", () => {
  for (const [method, path] of [
    ["GET", "/auth/sessions"],
    ["DELETE", "/auth/sessions/:id"],
    ["GET", "/auth/events"],
  ] as const) {
    it(`${method} ${path}: every sign of another site, even over a malformed cookie; nothing changes`, async () => {
      const user = newUser();
      const session = await issue(user);
      const other = await issue(user);
      await expectUnchanged(async () => {
        for (const headers of Object.values(crossSite)) {
          for (const value of [session.token, "garbage"]) {
            const cookie = { Cookie: `${COOKIE_NAME}=${value}`, ...headers };
            await expectError(await call(method, path.replace(":id", other.id), cookie), 403, "cross_site_request");
          }
        }
      });
      expect(await isLive(other.token)).toBe(true);
    });
  }
});

for (const [method, path] of [
  ["GET", "/auth/sessions"],
  ["DELETE", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA"],
] as const) {
  describe(`401 invalid_token: ${method} ${path.replace(/AAAA+/, ":id")}`, () => {
    it("no Bearer token: challenge without an error", async () => {
      await expectUnchanged(async () => {
        await expectError(await call(method, path), 401, "invalid_token", { wwwAuthenticate: CHALLENGE });
      });
    });

    for (const [name, authorization] of Object.entries(NOT_BEARER)) {
      it(`no Bearer token offered (${name}): challenge without an error`, async () => {
        await expectUnchanged(async () => {
          await expectError(await call(method, path, { Authorization: authorization }), 401, "invalid_token", {
            wwwAuthenticate: CHALLENGE,
          });
        });
      });
    }

    for (const [name, authorization] of Object.entries(MALFORMED_AUTHORIZATION)) {
      it(`malformed (${name})`, async () => {
        await expectUnchanged(async () => {
          await expectError(await call(method, path, { Authorization: authorization }), 401, "invalid_token", {
            wwwAuthenticate: REJECTED_CHALLENGE,
          });
        });
      });
    }

    it("unknown, wrong secret, revoked", async () => {
      for (const token of Object.values(await deadTokens())) {
        await expectUnchanged(async () => {
          await expectError(await call(method, path, bearer(token)), 401, "invalid_token", {
            wwwAuthenticate: REJECTED_CHALLENGE,
          });
        });
      }
    });

    it("expired (expires_at == now)", async () => {
      const token = await tokenExpiringNow();
      await expectUnchanged(async () => {
        await expectError(await call(method, path, bearer(token)), 401, "invalid_token", {
          wwwAuthenticate: REJECTED_CHALLENGE,
        });
      });
    });

    it("by cookie, malformed, unknown, wrong secret or revoked: the error, and the cookie kept", async () => {
      for (const value of [...Object.values(MALFORMED_COOKIE), ...Object.values(await deadTokens())]) {
        await expectUnchanged(async () => {
          await expectError(await call(method, path, { Cookie: `${COOKIE_NAME}=${value}` }), 401, "invalid_token", {
            wwwAuthenticate: REJECTED_CHALLENGE,
          });
        });
      }
    });
  });
}

describe("400 session_id_required and 401 not_authorized: DELETE /auth/sessions/:id", () => {
  it("empty or blank id", async () => {
    const session = await issue(newUser());
    for (const path of ["/auth/sessions/", "/auth/sessions", "/auth/sessions/%20%20"]) {
      await expectUnchanged(async () => {
        await expectError(await call("DELETE", path, bearer(session.token)), 400, "session_id_required");
      });
    }
  });

  it("unknown, expired and another user's id get the same answer", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const user = newUser();
    const caller = await issue(user, { ttlSeconds: 3600 });
    const expiredOwn = await issue(user, { ttlSeconds: 1 });
    const someoneElses = await issue(newUser());
    vi.setSystemTime(Date.now() + 1000);
    for (const id of ["A".repeat(24), expiredOwn.id, someoneElses.id]) {
      await expectUnchanged(async () => {
        await expectError(await call("DELETE", `/auth/sessions/${id}`, bearer(caller.token)), 401, "not_authorized", {
          wwwAuthenticate: CHALLENGE,
        });
      });
    }
    expect(await isLive(someoneElses.token)).toBe(true);
  });
});

describe("POST /auth/logout", () => {
  it("401 token_required with neither Bearer nor cookie (other cookies are not the session cookie)", async () => {
    const requests: Record<string, string>[] = [{}, { Cookie: "theme=dark; session=abc" }];
    for (const headers of requests) {
      await expectUnchanged(async () => {
        await expectError(await call("POST", "/auth/logout", headers), 401, "token_required", {
          wwwAuthenticate: CHALLENGE,
        });
      });
    }
  });

  it("400 session_invalid for a malformed Bearer token", async () => {
    for (const authorization of Object.values({ ...NOT_BEARER, ...MALFORMED_AUTHORIZATION })) {
      await expectUnchanged(async () => {
        await expectError(await call("POST", "/auth/logout", { Authorization: authorization }), 400, "session_invalid");
      });
    }
  });

  it("400 session_invalid for a malformed cookie, clearing it", async () => {
    for (const value of Object.values(MALFORMED_COOKIE)) {
      await expectUnchanged(async () => {
        await expectError(
          await call("POST", "/auth/logout", { Cookie: `${COOKIE_NAME}=${value}` }),
          400,
          "session_invalid",
          {
            setCookie: CLEARED_COOKIE,
          },
        );
      });
    }
  });

  it("400 session_invalid for unknown, wrong-secret, revoked and expired tokens, by Bearer and by cookie", async () => {
    const tokens = { ...(await deadTokens()), expired: await tokenExpiringNow() };
    for (const token of Object.values(tokens)) {
      await expectUnchanged(async () => {
        await expectError(await call("POST", "/auth/logout", bearer(token)), 400, "session_invalid");
        await expectError(await call("POST", "/auth/logout", sessionCookie(token)), 400, "session_invalid", {
          setCookie: CLEARED_COOKIE,
        });
      });
    }
  });
});

describe("DELETE /auth/logout", () => {
  it("401 token_required with no token at all", async () => {
    await expectUnchanged(async () => {
      await expectError(await call("DELETE", "/auth/logout"), 401, "token_required", { wwwAuthenticate: CHALLENGE });
    });
  });

  it("400 session_invalid for a malformed token, by Bearer and by cookie", async () => {
    for (const authorization of Object.values({ ...NOT_BEARER, ...MALFORMED_AUTHORIZATION })) {
      await expectUnchanged(async () => {
        await expectError(
          await call("DELETE", "/auth/logout", { Authorization: authorization }),
          400,
          "session_invalid",
        );
      });
    }
    for (const value of Object.values(MALFORMED_COOKIE)) {
      await expectUnchanged(async () => {
        await expectError(
          await call("DELETE", "/auth/logout", { Cookie: `${COOKIE_NAME}=${value}` }),
          400,
          "session_invalid",
          {
            setCookie: CLEARED_COOKIE,
          },
        );
      });
    }
  });

  it("401 session_invalid for a well-formed but unknown, revoked or expired token", async () => {
    const tokens = { ...(await deadTokens()), expired: await tokenExpiringNow() };
    for (const token of Object.values(tokens)) {
      await expectUnchanged(async () => {
        await expectError(await call("DELETE", "/auth/logout", bearer(token)), 401, "session_invalid", {
          wwwAuthenticate: REJECTED_CHALLENGE,
        });
        await expectError(await call("DELETE", "/auth/logout", sessionCookie(token)), 401, "session_invalid", {
          wwwAuthenticate: REJECTED_CHALLENGE,
          setCookie: CLEARED_COOKIE,
        });
      });
    }
  });
});

describe("405 method_not_allowed on known paths", () => {
  const cases: [string, string, string][] = [
    ["GET", "/auth/logout", "POST, DELETE"],
    ["PUT", "/auth/logout", "POST, DELETE"],
    ["PATCH", "/auth/logout", "POST, DELETE"],
    ["OPTIONS", "/auth/logout", "POST, DELETE"],
    ["POST", "/auth/sessions", "GET, HEAD, DELETE"],
    ["PUT", "/auth/sessions", "GET, HEAD, DELETE"],
    ["GET", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA", "DELETE"],
    ["POST", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA", "DELETE"],
    ["GET", "/auth/sessions/", "DELETE"],
  ];
  for (const [method, path, allow] of cases) {
    it(`${method} ${path} → Allow: ${allow}, nothing changes, even with a live token`, async () => {
      const session = await issue(newUser());
      await expectUnchanged(async () => {
        await expectError(
          await call(method, path, { ...bearer(session.token), ...sessionCookie(session.token) }),
          405,
          "method_not_allowed",
          {
            allow,
          },
        );
      });
    });
  }
});

describe("404 not_found", () => {
  for (const path of ["/auth/logout/", "/auth/sessions/a/b", "/auth", "/auth/whatever"]) {
    it(`${path} (under /auth/: no-store)`, async () => {
      await expectError(await call("GET", path), 404, "not_found");
    });
  }
  for (const path of ["/", "/favicon.ico"]) {
    it(`${path}`, async () => {
      await expectError(await call("GET", path), 404, "not_found", { cacheControl: null });
    });
  }
});

describe("the success rows, for contrast", () => {
  it("lowercase 'bearer' is accepted (scheme names are case-insensitive)", async () => {
    const session = await issue(newUser());
    await expectMessage(await call("POST", "/auth/logout", { Authorization: `bearer ${session.token}` }), "Logged out");
  });
});
