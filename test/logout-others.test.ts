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
  REJECTED_CHALLENGE,
  sessionCookie,
  sessionIdsOf,
  tableSnapshot,
} from "./helpers.ts";
import { deadTokens } from "./tokens.ts";

describe("DELETE /auth/logout?scope=others", () => {
  it("ends every other session of the user, keeps the caller's session and cookie, says how many", async () => {
    const user = newUser();
    const bystander = newUser();
    const current = await issue(user);
    const others = await Promise.all([issue(user), issue(user), issue(user)]);
    const theirs = await issue(bystander);
    await expectMessage(
      await call("DELETE", "/auth/logout?scope=others", { ...sessionCookie(current.token) }),
      "Logged out of 3 other sessions",
    );
    expect(await sessionIdsOf(user)).toEqual([current.id]);
    expect(await isLive(current.token)).toBe(true);
    for (const other of others) expect(await isLive(other.token)).toBe(false);
    expect(await isLive(theirs.token)).toBe(true);
  });

  it("counts in the singular and zero", async () => {
    const user = newUser();
    const current = await issue(user);
    await issue(user);
    await expectMessage(
      await call("DELETE", "/auth/logout?scope=others", bearer(current.token)),
      "Logged out of 1 other session",
    );
    await expectMessage(
      await call("DELETE", "/auth/logout?scope=others", bearer(current.token)),
      "Logged out of 0 other sessions",
    );
    expect(await isLive(current.token)).toBe(true);
  });

  it("refuses an unknown scope with 400 once the token is proven live; nothing ends", async () => {
    const user = newUser();
    const current = await issue(user);
    await issue(user);
    const before = await tableSnapshot();
    for (const query of ["scope=all", "scope=", "scope=OTHERS", "scope=others%00", `scope=${"x".repeat(500)}`]) {
      await expectError(await call("DELETE", `/auth/logout?${query}`, bearer(current.token)), 400, "invalid_scope");
      // The contract's logout rule: a carried cookie is cleared on every 400.
      await expectError(
        await call("DELETE", `/auth/logout?${query}`, sessionCookie(current.token)),
        400,
        "invalid_scope",
        {
          setCookie: CLEARED_COOKIE,
        },
      );
      // The contract's rows come first: no token, cross-site, malformed.
      await expectError(await call("DELETE", `/auth/logout?${query}`), 401, "token_required", {
        wwwAuthenticate: 'Bearer realm="auth"',
      });
      await expectError(
        await call("DELETE", `/auth/logout?${query}`, {
          ...sessionCookie(current.token),
          "Sec-Fetch-Site": "cross-site",
        }),
        403,
        "cross_site_request",
      );
      await expectError(
        await call("DELETE", `/auth/logout?${query}`, { Authorization: "Bearer x" }),
        400,
        "session_invalid",
      );
    }
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(current.token)).toBe(true);
  });

  it("answers a dead token like DELETE /auth/logout does, whatever the scope, clearing a dead cookie", async () => {
    for (const token of Object.values(await deadTokens())) {
      // The contract's 401 for a dead token comes before the addition's invalid_scope.
      for (const query of ["scope=others", "scope=all"]) {
        await expectError(await call("DELETE", `/auth/logout?${query}`, bearer(token)), 401, "session_invalid", {
          wwwAuthenticate: REJECTED_CHALLENGE,
        });
        await expectError(await call("DELETE", `/auth/logout?${query}`, sessionCookie(token)), 401, "session_invalid", {
          wwwAuthenticate: REJECTED_CHALLENGE,
          setCookie: CLEARED_COOKIE,
        });
      }
    }
    await expectError(await call("DELETE", "/auth/logout?scope=others"), 401, "token_required", {
      wwwAuthenticate: 'Bearer realm="auth"',
    });
    await expectError(
      await call("DELETE", "/auth/logout?scope=others", { Authorization: "Basic x" }),
      400,
      "session_invalid",
    );
  });

  it("is refused cross-site like any cookie logout", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    await expectError(
      await call("DELETE", "/auth/logout?scope=others", {
        ...sessionCookie(current.token),
        "Sec-Fetch-Site": "cross-site",
      }),
      403,
      "cross_site_request",
    );
    expect(await isLive(other.token)).toBe(true);
  });

  it("without the parameter, DELETE /auth/logout still ends every session, the caller's included", async () => {
    const user = newUser();
    const current = await issue(user);
    await issue(user);
    await expectMessage(
      await call("DELETE", "/auth/logout", sessionCookie(current.token)),
      "Logged out of all sessions",
      CLEARED_COOKIE,
    );
    expect(await sessionIdsOf(user)).toEqual([]);
  });
});
