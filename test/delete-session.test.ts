import { describe, expect, it } from "vitest";
import {
  bearer,
  CHALLENGE,
  CLEARED_COOKIE,
  call,
  expectError,
  expectMessage,
  isLive,
  issue,
  newUser,
  ORIGIN,
  sessionCookie,
  sessionIdsOf,
  tableSnapshot,
} from "./helpers.ts";

describe("DELETE /auth/sessions/:id", () => {
  it("deletes another session of the caller's, leaving the caller signed in and the cookie alone", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    await expectMessage(await call("DELETE", `/auth/sessions/${other.id}`, bearer(current.token)), "Session deleted");
    expect(await sessionIdsOf(user)).toEqual([current.id]);
    expect(await isLive(other.token)).toBe(false);
    expect(await isLive(current.token)).toBe(true);
  });

  it("deletes the caller's own session, clears the cookie, and the token is dead", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    await expectMessage(
      await call("DELETE", `/auth/sessions/${current.id}`, bearer(current.token)),
      "Session deleted",
      CLEARED_COOKIE,
    );
    expect(await isLive(current.token)).toBe(false);
    expect(await sessionIdsOf(user)).toEqual([other.id]);
    await expectError(await call("GET", "/auth/sessions", bearer(current.token)), 401, "invalid_token", {
      wwwAuthenticate: 'Bearer realm="auth", error="invalid_token"',
    });
  });

  it("takes the session cookie from the same site: another session, then its own (clearing the cookie)", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    const byCookie = { ...sessionCookie(current.token), Origin: ORIGIN, "Sec-Fetch-Site": "same-origin" };
    await expectMessage(await call("DELETE", `/auth/sessions/${other.id}`, byCookie), "Session deleted");
    expect(await isLive(other.token)).toBe(false);
    expect(await isLive(current.token)).toBe(true);
    await expectMessage(
      await call("DELETE", `/auth/sessions/${current.id}`, byCookie),
      "Session deleted",
      CLEARED_COOKIE,
    );
    expect(await sessionIdsOf(user)).toEqual([]);
  });

  it("by cookie from another site: 403 cross_site_request, before the id is looked at, and nothing ends", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    const before = await tableSnapshot();
    for (const path of [`/auth/sessions/${other.id}`, "/auth/sessions/", "/auth/sessions"]) {
      await expectError(
        await call("DELETE", path, { ...sessionCookie(current.token), Origin: "https://evil.example" }),
        403,
        "cross_site_request",
      );
    }
    expect(await tableSnapshot()).toEqual(before);
  });

  it("refuses another user's session with 401 not_authorized and leaves it alive", async () => {
    const mallory = await issue(newUser());
    const alice = newUser();
    const victim = await issue(alice);
    const before = await tableSnapshot();
    await expectError(
      await call("DELETE", `/auth/sessions/${victim.id}`, bearer(mallory.token)),
      401,
      "not_authorized",
      {
        wwwAuthenticate: CHALLENGE,
      },
    );
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(victim.token)).toBe(true);
  });

  it("answers an unknown id exactly like another user's", async () => {
    const caller = await issue(newUser());
    const before = await tableSnapshot();
    await expectError(
      await call("DELETE", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA", bearer(caller.token)),
      401,
      "not_authorized",
      { wwwAuthenticate: CHALLENGE },
    );
    expect(await tableSnapshot()).toEqual(before);
  });

  it("requires an id: /auth/sessions/ and /auth/sessions are 400 once authenticated", async () => {
    const caller = await issue(newUser());
    const before = await tableSnapshot();
    for (const path of ["/auth/sessions/", "/auth/sessions", "/auth/sessions/%20", "/auth/sessions/%09%20"]) {
      await expectError(await call("DELETE", path, bearer(caller.token)), 400, "session_id_required");
    }
    expect(await tableSnapshot()).toEqual(before);
  });

  it("checks authentication before the id", async () => {
    for (const path of ["/auth/sessions/", "/auth/sessions", "/auth/sessions/AAAAAAAAAAAAAAAAAAAAAA"]) {
      await expectError(await call("DELETE", path), 401, "invalid_token", { wwwAuthenticate: CHALLENGE });
    }
  });

  it("deleting the same session twice answers 200 then 401", async () => {
    const user = newUser();
    const current = await issue(user);
    const other = await issue(user);
    expect((await call("DELETE", `/auth/sessions/${other.id}`, bearer(current.token))).status).toBe(200);
    await expectError(
      await call("DELETE", `/auth/sessions/${other.id}`, bearer(current.token)),
      401,
      "not_authorized",
      {
        wwwAuthenticate: CHALLENGE,
      },
    );
  });
});
