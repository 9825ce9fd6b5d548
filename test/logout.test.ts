import { describe, expect, it } from "vitest";
import {
  bearer,
  CLEARED_COOKIE,
  call,
  expectError,
  expectMessage,
  isLive,
  issue,
  newUser,
  ORIGIN,
  REJECTED_CHALLENGE,
  sessionCookie,
  sessionIdsOf,
  tableSnapshot,
} from "./helpers.ts";

describe("POST /auth/logout", () => {
  it("logs out the Bearer token's session only", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    await expectMessage(await call("POST", "/auth/logout", bearer(current.token)), "Logged out");
    expect(await isLive(current.token)).toBe(false);
    expect(await sessionIdsOf(user)).toEqual([other.id]);
  });

  it("logs out by cookie from the same origin and clears the cookie", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    await expectMessage(
      await call("POST", "/auth/logout", {
        ...sessionCookie(current.token),
        Origin: ORIGIN,
        "Sec-Fetch-Site": "same-origin",
      }),
      "Logged out",
      CLEARED_COOKIE,
    );
    expect(await isLive(current.token)).toBe(false);
    expect(await isLive(other.token)).toBe(true);
  });

  it("logs out by cookie sent without Origin or Sec-Fetch-Site (non-browser clients)", async () => {
    const current = await issue(newUser());
    await expectMessage(await call("POST", "/auth/logout", sessionCookie(current.token)), "Logged out", CLEARED_COOKIE);
    expect(await isLive(current.token)).toBe(false);
  });

  it("lets the Bearer token decide when both are sent, and still clears the cookie", async () => {
    const user = newUser();
    const viaBearer = await issue(user);
    const viaCookie = await issue(user);
    await expectMessage(
      await call("POST", "/auth/logout", { ...bearer(viaBearer.token), ...sessionCookie(viaCookie.token) }),
      "Logged out",
      CLEARED_COOKIE,
    );
    expect(await isLive(viaBearer.token)).toBe(false);
    expect(await isLive(viaCookie.token)).toBe(true);
  });

  it("never falls back to the cookie when the Bearer token is rejected", async () => {
    const cookieSession = await issue(newUser());
    const before = await tableSnapshot();
    await expectError(
      await call("POST", "/auth/logout", { Authorization: "Bearer nope", ...sessionCookie(cookieSession.token) }),
      400,
      "session_invalid",
      { setCookie: CLEARED_COOKIE },
    );
    expect(await tableSnapshot()).toEqual(before);
  });

  it("a double logout answers 200 then 400 session_invalid, clearing the cookie both times", async () => {
    const current = await issue(newUser());
    const headers = sessionCookie(current.token);
    await expectMessage(await call("POST", "/auth/logout", headers), "Logged out", CLEARED_COOKIE);
    await expectError(await call("POST", "/auth/logout", headers), 400, "session_invalid", {
      setCookie: CLEARED_COOKIE,
    });
  });

  it("ignores a token in the query string or the body", async () => {
    const current = await issue(newUser());
    const response = await call("POST", `/auth/logout?token=${current.token}`);
    await expectError(response, 401, "token_required", { wwwAuthenticate: 'Bearer realm="auth"' });
    expect(await isLive(current.token)).toBe(true);
  });
});

describe("GET and HEAD /auth/logout", () => {
  for (const method of ["GET", "HEAD"]) {
    it(`${method} is 405 with Allow: POST, DELETE, leaves the session alive and sets no cookie`, async () => {
      const current = await issue(newUser());
      const before = await tableSnapshot();
      const response = await call(method, "/auth/logout", {
        ...bearer(current.token),
        ...sessionCookie(current.token),
      });
      expect(response.status).toBe(405);
      expect(response.headers.get("Allow")).toBe("POST, DELETE");
      expect(response.headers.get("Set-Cookie")).toBeNull();
      expect(response.headers.get("Cache-Control")).toBe("no-store");
      if (method === "GET") {
        expect(await response.json()).toEqual({
          code: "method_not_allowed",
          message: "This method is not allowed on this path.",
        });
      } else {
        expect(await response.text()).toBe("");
      }
      expect(await tableSnapshot()).toEqual(before);
      expect(await isLive(current.token)).toBe(true);
    });
  }
});

describe("DELETE /auth/logout", () => {
  it("ends every session of the caller's user and no one else's", async () => {
    const user = newUser();
    const bystander = newUser();
    const sessions = await Promise.all([issue(user), issue(user), issue(user)]);
    const theirs = await issue(bystander);
    await expectMessage(await call("DELETE", "/auth/logout", bearer(sessions[1]!.token)), "Logged out of all sessions");
    expect(await sessionIdsOf(user)).toEqual([]);
    for (const session of sessions) expect(await isLive(session.token)).toBe(false);
    expect(await sessionIdsOf(bystander)).toEqual([theirs.id]);
    expect(await isLive(theirs.token)).toBe(true);
  });

  it("works by cookie from the same origin and clears it", async () => {
    const user = newUser();
    const a = await issue(user);
    const b = await issue(user);
    await expectMessage(
      await call("DELETE", "/auth/logout", { ...sessionCookie(a.token), Origin: ORIGIN }),
      "Logged out of all sessions",
      CLEARED_COOKIE,
    );
    expect(await isLive(b.token)).toBe(false);
  });

  it("a second logout-all with the same token is 401 session_invalid", async () => {
    const a = await issue(newUser());
    expect((await call("DELETE", "/auth/logout", bearer(a.token))).status).toBe(200);
    await expectError(await call("DELETE", "/auth/logout", bearer(a.token)), 401, "session_invalid", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
  });
});
