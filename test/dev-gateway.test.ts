import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import devWorker from "../dev/dev-worker.ts";
import { bucketOf } from "../src/db/shards.ts";
import { isLive, issue, newUser, shardBindings } from "./helpers.ts";

// The operator gateway `npm start` serves (dev/dev-worker.ts): the operator commands'
// way to the local D1 while the server holds it. Never deployed; still refuses strangers.

const TOKEN = "operator-test-token";

async function gateway(
  method: string,
  path: string,
  options: { token?: string | null; body?: unknown; vars?: Record<string, unknown> } = {},
) {
  const { token = TOKEN, body, vars = { OPERATOR_TOKEN: TOKEN } } = options;
  const request = new Request(`https://sessions.example${path}`, {
    method,
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const response = await devWorker.fetch(request, { ...env, ...vars } as Env, createExecutionContext());
  return { status: response.status, body: await response.json() };
}

describe("the operator gateway of npm start", () => {
  it("refuses a call without the server's token, a wrong one, and any call when the server has none", async () => {
    const refused = { status: 401, body: { error: "operator token required" } };
    expect(await gateway("GET", "/__operator/vars", { token: null })).toEqual(refused);
    expect(await gateway("GET", "/__operator/vars", { token: "guess" })).toEqual(refused);
    expect(await gateway("GET", "/__operator/vars", { token: "undefined", vars: {} })).toEqual(refused);
  });

  it("answers the server's vars, never its token", async () => {
    const { status, body } = await gateway("GET", "/__operator/vars");
    expect(status).toBe(200);
    expect(body).toMatchObject({ SHARDS: env.SHARDS, SESSION_COOKIE_NAME: "__Host-session" });
    expect(JSON.stringify(body)).not.toContain(TOKEN);
  });

  it("runs a statement and a batch on a D1 binding, and reports a failing one", async () => {
    const [binding] = shardBindings() as [string];
    const select = { sql: "SELECT ? AS n", params: [7] };
    expect(
      await gateway("POST", "/__operator/d1", { body: { binding, method: "first", statements: [select] } }),
    ).toEqual({ status: 200, body: { result: { n: 7 } } });
    const batch = await gateway("POST", "/__operator/d1", {
      body: {
        binding,
        method: "batch",
        statements: [select, { sql: "SELECT count(*) AS c FROM bucket_moves", params: [] }],
      },
    });
    expect(batch.status).toBe(200);
    expect((batch.body as { result: { results: unknown[] }[] }).result.map((r) => r.results)).toEqual([
      [{ n: 7 }],
      [{ c: 0 }],
    ]);
    const failing = await gateway("POST", "/__operator/d1", {
      body: { binding, method: "run", statements: [{ sql: "SELECT * FROM no_such_table", params: [] }] },
    });
    expect(failing.status).toBe(422);
    expect((failing.body as { error: string }).error).toContain("no such table");
  });

  it("refuses what is not a D1 binding, an unknown method or path, before touching anything", async () => {
    const statements = [{ sql: "SELECT 1", params: [] }];
    expect(await gateway("POST", "/__operator/d1", { body: { binding: "SHARDS", method: "all", statements } })).toEqual(
      { status: 400, body: { error: "bad operator call (binding SHARDS)" } },
    );
    // A service binding answers to any method name, prepare and batch among them.
    expect(
      await gateway("POST", "/__operator/d1", { body: { binding: "LOGIN_WORKER", method: "all", statements } }),
    ).toEqual({ status: 400, body: { error: "bad operator call (binding LOGIN_WORKER)" } });
    expect(await gateway("POST", "/__operator/d1", { body: { binding: "DB", method: "exec", statements } })).toEqual({
      status: 400,
      body: { error: "bad operator call (binding DB)" },
    });
    expect(await gateway("GET", "/__operator/d1")).toEqual({ status: 404, body: { error: "no such operator call" } });
  });

  it.skipIf(shardBindings().length < 2)(
    "moves buckets inside the server, a part a call, then finishes once the printed SHARDS serves",
    async () => {
      const asked = { region: "default", first: 600, last: 602, to: "DB_1" };
      let user = newUser();
      while ((await bucketOf(user)) !== 601) user = newUser();
      const session = await issue(user);
      const move = (body: object, vars?: Record<string, unknown>) =>
        gateway("POST", "/__operator/shards/move", { body, ...(vars ? { vars } : {}) });
      expect(await move({ ...asked, to: "DB_9", from: 600, count: 2 })).toEqual({
        status: 422,
        body: { error: "DB_9 is not a d1_databases binding of this environment" },
      });
      const shards = JSON.stringify({
        default: {
          "0-599": "DB",
          "600-602": "DB_1",
          "603-1023": "DB",
          "1024-2047": "DB_1",
          "2048-3071": "DB_2",
          "3072-4095": "DB_3",
        },
      });
      expect(await move({ ...asked, from: 600, count: 2 })).toEqual({
        status: 200,
        body: { result: { moved: 2, alreadyThere: 0, sessions: 1, events: 1, shards } },
      });
      expect(await move({ ...asked, from: 602, count: 2 })).toEqual({
        status: 200,
        body: { result: { moved: 1, alreadyThere: 0, sessions: 0, events: 0, shards } },
      });
      expect(await isLive(session.token)).toBe(true);
      const finish = (vars: Record<string, unknown>) => gateway("POST", "/__operator/shards/finish", { vars });
      expect(await finish({ OPERATOR_TOKEN: TOKEN })).toMatchObject({
        status: 422,
        body: { error: expect.stringMatching(/^SHARDS maps bucket [\w-]+ to DB, which sends it on to DB_1/) },
      });
      expect(await finish({ OPERATOR_TOKEN: TOKEN, SHARDS: shards })).toEqual({
        status: 200,
        body: { result: { dropped: 3 } },
      });
    },
  );

  it("leaves every other request to the service", async () => {
    const response = await devWorker.fetch(
      new Request("https://sessions.example/auth/sessions"),
      env,
      createExecutionContext(),
    );
    expect(response.status).toBe(401);
  });
});
