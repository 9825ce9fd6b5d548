// The worker `npm start` serves: the service itself (src/index.ts, what `wrangler deploy`
// ships) plus the operator gateway, which exists only here. The operator commands
// (scripts/local-d1.ts) send their statements through it while `npm start` serves, so every
// write reaches the local D1 through workerd's own D1, queued with the requests' writes,
// instead of opening the SQLite file that workerd holds ("database is locked" on both sides).
//   POST /__operator/d1    {binding, method, statements: [{sql, params}]}  -> {result} | {error}
//   GET  /__operator/vars  the server's string vars (SHARDS as this server runs it)
// Both need `Authorization: Bearer <OPERATOR_TOKEN>`, a random value scripts/dev.ts gives
// wrangler in a file (--env-file) and writes to .wrangler/dev-server.json, both readable by
// this user alone: a web page cannot reach the gateway.
import worker from "../src/index.ts";

export { SessionService } from "../src/index.ts";

const METHODS = ["all", "first", "raw", "run", "batch"] as const;

interface GatewayCall {
  binding: string;
  method: (typeof METHODS)[number];
  statements: { sql: string; params: unknown[] }[];
}

function isD1(value: unknown): value is D1Database {
  return typeof value === "object" && value !== null && "prepare" in value && "batch" in value;
}

async function gateway(request: Request, env: Record<string, unknown>, path: string): Promise<Response> {
  const token = env.OPERATOR_TOKEN;
  if (typeof token !== "string" || request.headers.get("Authorization") !== `Bearer ${token}`)
    return Response.json({ error: "operator token required" }, { status: 401 });
  if (path === "/__operator/vars" && request.method === "GET") {
    const vars = Object.entries(env).filter(([name, value]) => typeof value === "string" && name !== "OPERATOR_TOKEN");
    return Response.json(Object.fromEntries(vars));
  }
  if (path !== "/__operator/d1" || request.method !== "POST")
    return Response.json({ error: "no such operator call" }, { status: 404 });
  const call = (await request.json()) as GatewayCall;
  const d1 = env[call.binding];
  if (!isD1(d1) || !METHODS.includes(call.method) || call.statements.length === 0)
    return Response.json({ error: `bad operator call (binding ${call.binding})` }, { status: 400 });
  const statements = call.statements.map(({ sql, params }) => d1.prepare(sql).bind(...params));
  try {
    const [first] = statements as [D1PreparedStatement];
    const result =
      call.method === "batch"
        ? await d1.batch(statements)
        : call.method === "all"
          ? await first.all()
          : call.method === "first"
            ? await first.first()
            : call.method === "raw"
              ? await first.raw()
              : await first.run();
    return Response.json({ result });
  } catch (error) {
    // The command's own statement failed (a constraint, a refused move): it reports it.
    return Response.json({ error: error instanceof Error ? error.message : String(error) }, { status: 422 });
  }
}

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext) {
    const path = new URL(request.url).pathname;
    if (path.startsWith("/__operator/")) return gateway(request, env as unknown as Record<string, unknown>, path);
    return worker.fetch(request, env, ctx);
  },
  scheduled: worker.scheduled,
};
