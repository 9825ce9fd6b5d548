import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import devWorker from "../scripts/dev-worker.ts";
import { shardBindings } from "./helpers.ts";

// The operator gateway `npm start` serves (scripts/dev-worker.ts): the operator commands'
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
    expect(await gateway("POST", "/__operator/d1", { body: { binding: "DB", method: "exec", statements } })).toEqual({
      status: 400,
      body: { error: "bad operator call (binding DB)" },
    });
    expect(await gateway("GET", "/__operator/d1")).toEqual({ status: 404, body: { error: "no such operator call" } });
  });

  it("leaves every other request to the service", async () => {
    const response = await devWorker.fetch(
      new Request("https://sessions.example/auth/sessions"),
      env,
      createExecutionContext(),
    );
    expect(response.status).toBe(401);
  });
});
