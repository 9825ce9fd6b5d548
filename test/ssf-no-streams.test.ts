import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { bearer, bindingOfUser, CHROME_MAC, callWith, d1, newUser, wrapShards } from "./helpers.ts";
import { standInUpstream, transmitter } from "./ssf.ts";

// Its own file, so its own database: a transmitter with no stream at all.

/** The database, but any statement on the streams fails (and with it its batch). */
function streamsFailing(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, name) {
      if (name === "prepare")
        return (query: string) => target.prepare(query.includes("ssf_streams") ? "SELECT * FROM no_such_table" : query);
      const value = Reflect.get(target, name);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const pendingOf = async (userId: string) =>
  (
    await d1(await bindingOfUser(userId))
      .prepare("SELECT type, pending_delivery FROM session_events WHERE user_id = ? ORDER BY id")
      .bind(userId)
      .all()
  ).results;

it("with a transmitter but no stream, events are written as without one, once the outbox saw none", async () => {
  const { vars } = await transmitter();
  const login = async (userId: string, bindings: Partial<Env> = {}) => {
    const ctx = createExecutionContext();
    const session = await new SessionService(ctx, { ...env, ...vars, ...bindings } as Env).create({
      userId,
      userAgent: CHROME_MAC,
      ipAddress: "203.0.113.7",
    });
    await waitOnExecutionContext(ctx);
    return session;
  };
  // The isolate has not looked yet: pending, to be safe; delivered at once.
  const first = newUser();
  await login(first);
  expect(await pendingOf(first)).toEqual([{ type: "created", pending_delivery: 0 }]);
  // Now it knows there is none: nothing pending is written at all. Were the events pending,
  // the failing look at the streams would leave them so.
  const second = newUser();
  const noStreams = wrapShards((db, binding) => (binding === "DB" ? streamsFailing(db) : db));
  const session = await login(second, noStreams);
  expect((await callWith({ ...vars, ...noStreams }, "POST", "/auth/logout", bearer(session.token))).status).toBe(200);
  expect(await pendingOf(second)).toEqual([
    { type: "created", pending_delivery: 0 },
    { type: "logout", pending_delivery: 0 },
  ]);
  // So are the endings an upstream's SET asks for (POST /ssf/inbound).
  const third = newUser();
  await login(third, noStreams);
  const idp = await standInUpstream();
  const pushed = await callWith(
    { ...vars, ...noStreams, ...idp.vars },
    "POST",
    "/ssf/inbound",
    { "Content-Type": "application/secevent+jwt" },
    await idp.setAbout(third),
  );
  expect(pushed.status).toBe(202);
  expect(await pendingOf(third)).toEqual([
    { type: "created", pending_delivery: 0 },
    { type: "ended_by_upstream", pending_delivery: 0 },
  ]);
  expect(await d1("DB").prepare("SELECT count(*) AS n FROM ssf_queued_sets").first()).toEqual({ n: 0 });
});
