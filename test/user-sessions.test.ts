import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { openShards } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import {
  endSession as endOneSession,
  endUserSessions as endSessionsOfUser,
  listUserSessions as listSessionsOfUser,
} from "../src/services/user-sessions.ts";
import { countingShards } from "./d1.ts";
import { bearer, call, databases, isLive, issue, newUser, scopeWith, tableSnapshot } from "./helpers.ts";

// SessionService.listUserSessions / endUserSessions / endSession: the rest of the system sees
// and ends a user's sessions without a token. Rejections are tested on the shared code path
// (src/services/user-sessions.ts), as in session-service.test.ts: an RPC method's rejection is reported
// by the runtime as an uncaught error in the callee, which the pool would count as a failure.

async function eventsOf(token: string) {
  const body = (await (await call("GET", "/auth/events", bearer(token))).json()) as {
    events: { type: string; session_id: string; reason: string | null; actor_session_id: string | null }[];
  };
  return body.events;
}

describe("SessionService.listUserSessions", () => {
  it("returns exactly what GET /auth/sessions lists for the user", async () => {
    const userId = newUser();
    const a = await issue(userId, { country: "DE", city: "Berlin" });
    await issue(userId, { userAgent: "curl/8.5.0" });
    await issue(newUser());
    const listed = await exports.SessionService.listUserSessions(userId);
    const overHttp = (await (await call("GET", "/auth/sessions", bearer(a.token))).json()) as { sessions: unknown };
    // The user's list and a backend's differ by the organization alone, which a backend is shown.
    expect(listed).toEqual((overHttp.sessions as object[]).map((session) => ({ ...session, organization: null })));
    expect(listed).toHaveLength(2);
    expect(JSON.stringify(listed)).not.toContain(a.token.split(".")[1]);
  });

  it("is empty for an unknown user, and leaves out ended and expired sessions", async () => {
    expect(await exports.SessionService.listUserSessions(newUser())).toEqual([]);
    const userId = newUser();
    const ended = await issue(userId);
    const live = await issue(userId);
    await call("POST", "/auth/logout", bearer(ended.token));
    const listed = await exports.SessionService.listUserSessions(userId);
    expect(listed.map((s) => s.id)).toEqual([live.id]);
  });
});

describe("SessionService.endUserSessions", () => {
  it("ends every live session of the user, one `ended` event each with the reason", async () => {
    const userId = newUser();
    const sessions = [await issue(userId), await issue(userId), await issue(userId)];
    const bystander = await issue(newUser());
    expect(await exports.SessionService.endUserSessions({ userId, reason: "account_disabled" })).toEqual({ ended: 3 });
    for (const s of sessions) expect(await isLive(s.token)).toBe(false);
    expect(await isLive(bystander.token)).toBe(true);
    const fresh = await issue(userId);
    const endings = (await eventsOf(fresh.token)).filter((e) => e.type === "ended");
    expect(endings.map((e) => e.session_id).sort()).toEqual(sessions.map((s) => s.id).sort());
    expect(endings.every((e) => e.reason === "account_disabled" && e.actor_session_id === null)).toBe(true);
  });

  it("keeps exceptSessionId signed in, and takes any short reason the caller gives", async () => {
    const userId = newUser();
    const here = await issue(userId);
    const other = await issue(userId);
    expect(
      await exports.SessionService.endUserSessions({ userId, exceptSessionId: here.id, reason: "fraud review #42" }),
    ).toEqual({ ended: 1 });
    expect(await isLive(here.token)).toBe(true);
    expect(await isLive(other.token)).toBe(false);
    expect((await eventsOf(here.token)).find((e) => e.type === "ended")).toMatchObject({
      session_id: other.id,
      reason: "fraud review #42",
    });
  });

  it("answers 0 for an unknown user or a user with no live session, and writes nothing", async () => {
    const before = await tableSnapshot();
    expect(await exports.SessionService.endUserSessions({ userId: newUser(), reason: "admin" })).toEqual({ ended: 0 });
    expect(await tableSnapshot()).toEqual(before);
  });
});

describe("SessionService.endSession", () => {
  it("ends one session by id with the reason; false when there is no live session by that id", async () => {
    const userId = newUser();
    const target = await issue(userId);
    const kept = await issue(userId);
    expect(await exports.SessionService.endSession({ sessionId: target.id, reason: "admin" })).toEqual({ ended: true });
    expect(await exports.SessionService.endSession({ sessionId: target.id, reason: "admin" })).toEqual({
      ended: false,
    });
    expect(await exports.SessionService.endSession({ sessionId: "A".repeat(24), reason: "admin" })).toEqual({
      ended: false,
    });
    expect(await exports.SessionService.endSession({ sessionId: "not a session id", reason: "admin" })).toEqual({
      ended: false,
    });
    expect(await isLive(target.token)).toBe(false);
    expect(await isLive(kept.token)).toBe(true);
    expect((await eventsOf(kept.token)).filter((e) => e.type === "ended")).toEqual([
      {
        id: expect.any(Number),
        type: "ended",
        session_id: target.id,
        actor_session_id: null,
        ip_address: null,
        created_at: expect.any(String),
        reason: "admin",
        new_device: null,
      },
    ]);
  });
});

describe("bad input: a clear error, nothing changed, no round trip", () => {
  const blankOrBad = [
    "",
    "   ",
    " admin",
    "admin ",
    "x".repeat(65),
    "line\nbreak",
    "tab\there",
    "é",
    42,
    null,
    undefined,
  ];

  it("refuses the service's own reasons: the log's reason must say who ended the session", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const before = await tableSnapshot("session_events");
    for (const reason of ["context_changed", "reported_by_user", "upstream_relinked"]) {
      const refusals = [];
      for (const rpc of [
        () => exports.SessionService.endSession({ sessionId: session.id, reason }),
        () => exports.SessionService.endUserSessions({ userId, reason }),
      ]) {
        // Caught in a try: the pool reports an RPC rejection handed to `expect().rejects` as unhandled.
        try {
          await rpc();
          refusals.push("no error");
        } catch (error) {
          refusals.push(String(error));
        }
      }
      const refusal = `TypeError: reason ${reason} is the service's own, never a caller's`;
      expect(refusals).toEqual([refusal, refusal]);
    }
    expect(await tableSnapshot("session_events")).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });

  it("refuses a blank, long or non-printable reason, and a bad userId or sessionId", async () => {
    const userId = newUser();
    const session = await issue(userId);
    const before = await tableSnapshot();
    const counter = countingShards(databases());
    const shards = openShards({ ...env, ...counter.env });
    const config = readConfig(env);
    for (const reason of blankOrBad) {
      await expect(endSessionsOfUser(scopeWith(shards, config, null), { userId, reason } as never)).rejects.toThrow(
        /^reason must be 1 to 64 printable ASCII characters/,
      );
      await expect(
        endOneSession(scopeWith(shards, config, null), { sessionId: session.id, reason } as never),
      ).rejects.toThrow(/^reason must be/);
    }
    for (const bad of ["", "  ", "u".repeat(256), 7, null]) {
      await expect(
        endSessionsOfUser(scopeWith(shards, config, null), { userId: bad, reason: "admin" } as never),
      ).rejects.toThrow(/^userId must be a non-empty string/);
      await expect(listSessionsOfUser(scopeWith(shards, config), bad as never)).rejects.toThrow(
        /^userId must be a non-empty string/,
      );
    }
    await expect(
      endOneSession(scopeWith(shards, config, null), { sessionId: 5, reason: "admin" } as never),
    ).rejects.toThrow("sessionId must be a string");
    await expect(
      endSessionsOfUser(scopeWith(shards, config, null), { userId, exceptSessionId: 5, reason: "admin" } as never),
    ).rejects.toThrow("exceptSessionId must be a string");
    // The token instead of the id, say: refused rather than ending the session meant to stay.
    await expect(
      endSessionsOfUser(scopeWith(shards, config, null), { userId, exceptSessionId: session.token, reason: "admin" }),
    ).rejects.toThrow("exceptSessionId must be a session id");
    expect(counter.roundTrips()).toEqual({});
    expect(await tableSnapshot()).toEqual(before);
    expect(await isLive(session.token)).toBe(true);
  });
});
