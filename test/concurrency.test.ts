import { describe, expect, it } from "vitest";
import { bearer, call, isLive, issue, newUser, sessionCookie } from "./helpers.ts";

// Requests of one user fired at once: every answer is one of the contract's, and
// afterwards not one of the user's tokens works. Repeated, since interleavings vary.

const ROUNDS = 5;

describe("concurrency", () => {
  for (let round = 1; round <= ROUNDS; round++) {
    it(`round ${round}: deletes, lists, logouts and a logout-all at once leave no token alive`, async () => {
      const user = newUser();
      const bystander = await issue(newUser());
      const sessions = await Promise.all(Array.from({ length: 12 }, () => issue(user)));
      const [first, ...rest] = sessions as [(typeof sessions)[0], ...typeof sessions];
      const requests: [string, Promise<Response>][] = [
        ...rest
          .slice(0, 6)
          .map((s, i): [string, Promise<Response>] => [
            "delete",
            call("DELETE", `/auth/sessions/${s.id}`, bearer(sessions[(i + 3) % sessions.length]!.token)),
          ]),
        ...sessions
          .slice(0, 4)
          .map((s): [string, Promise<Response>] => ["list", call("GET", "/auth/sessions", bearer(s.token))]),
        ...rest
          .slice(4, 9)
          .map((s): [string, Promise<Response>] => ["logout", call("POST", "/auth/logout", sessionCookie(s.token))]),
        ["logout-all", call("DELETE", "/auth/logout", bearer(first.token))],
        ["events", call("GET", "/auth/events", bearer(rest[10]!.token))],
      ];
      const allowed: Record<string, number[]> = {
        delete: [200, 401],
        list: [200, 401],
        logout: [200, 400],
        "logout-all": [200, 401],
        events: [200, 401],
      };
      const statuses = await Promise.all(
        requests.map(async ([kind, response]) => [kind, (await response).status] as const),
      );
      for (const [kind, status] of statuses) expect(allowed[kind]).toContain(status);
      // The logout-all ran with a token that nothing else ended, so it must have succeeded.
      expect(statuses.find(([kind]) => kind === "logout-all")?.[1]).toBe(200);
      for (const session of sessions) expect(await isLive(session.token)).toBe(false);
      expect(await isLive(bystander.token)).toBe(true);
    });
  }

  it("a double logout of the same session, fired at once, answers 200 then 400, never 500", async () => {
    for (let i = 0; i < 10; i++) {
      const session = await issue(newUser());
      const statuses = (
        await Promise.all([
          call("POST", "/auth/logout", bearer(session.token)),
          call("POST", "/auth/logout", sessionCookie(session.token)),
        ])
      ).map((r) => r.status);
      expect(statuses.sort()).toEqual([200, 400]);
    }
  });

  it("concurrent deletes of one session: exactly one succeeds", async () => {
    const user = newUser();
    const [caller, target] = await Promise.all([issue(user), issue(user)]);
    const statuses = (
      await Promise.all(
        Array.from({ length: 8 }, () => call("DELETE", `/auth/sessions/${target.id}`, bearer(caller.token))),
      )
    ).map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 401)).toHaveLength(7);
  });
});
