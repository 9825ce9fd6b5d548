// The worker `npm start` serves: the service itself (src/index.ts, what `wrangler deploy`
// ships) plus the operator gateway, which exists only here. The operator commands
// (dev/local-d1.ts) send their statements through it while `npm start` serves, so every
// write reaches the local D1 through workerd's own D1, queued with the requests' writes,
// instead of opening the SQLite file that workerd holds ("database is locked" on both sides).
//   POST /__operator/d1    {binding, method, statements: [{sql, params}]}  -> {result} | {error}
//   GET  /__operator/vars  the server's string vars (SHARDS as this server runs it)
//   POST /__operator/shards/move    {region, first, last, to, from, count}  -> {result: MoveReport} | {error}
//   POST /__operator/shards/finish                                          -> {result: {dropped}} | {error}
// `shards:move` runs its steps here, next to the database (src/services/moves.ts): through
// the d1 call, each of a bucket's D1 calls would be an HTTP request queued behind the users'.
// Every call needs `Authorization: Bearer <OPERATOR_TOKEN>`, a random value dev/dev.ts gives
// wrangler in a file (--env-file) and writes to .wrangler/servers/<pid>.json, both readable by
// this user alone: a web page cannot reach the gateway. `npm run demo` serves this worker as
// its service too (dev/demo.ts, dev/demo-worker.ts). DEV_PLACE places its requests (below).
import { clientContext } from "../src/domain/client-context.ts";
import worker from "../src/index.ts";
import {
  finishMoving,
  type MoveAsked,
  type MoveDatabases,
  type MovePart,
  moveBucketRange,
} from "../src/services/moves.ts";

export { SessionService } from "../src/index.ts";

const METHODS = ["all", "first", "raw", "run", "batch"] as const;

interface GatewayCall {
  binding: string;
  method: (typeof METHODS)[number];
  statements: { sql: string; params: unknown[] }[];
}

/** A D1 binding. A service binding (the tests' login worker) claims every method for RPC; it alone has fetch. */
function isD1(value: unknown): value is D1Database {
  return typeof value === "object" && value !== null && "prepare" in value && "batch" in value && !("fetch" in value);
}

async function gateway(request: Request, env: Record<string, unknown>, path: string): Promise<Response> {
  const token = env.OPERATOR_TOKEN;
  if (typeof token !== "string" || request.headers.get("Authorization") !== `Bearer ${token}`)
    return Response.json({ error: "operator token required" }, { status: 401 });
  if (path === "/__operator/vars" && request.method === "GET") {
    const vars = Object.entries(env).filter(([name, value]) => typeof value === "string" && name !== "OPERATOR_TOKEN");
    return Response.json(Object.fromEntries(vars));
  }
  if (path === "/__operator/shards/move" || path === "/__operator/shards/finish") {
    if (request.method !== "POST") return Response.json({ error: "no such operator call" }, { status: 404 });
    const databases: MoveDatabases = {
      shards: String(env.SHARDS),
      bindings: Object.keys(env).filter((name) => isD1(env[name])),
      d1: (binding) => env[binding] as D1Database,
    };
    return answer(() =>
      path === "/__operator/shards/move"
        ? request.json().then((body) => {
            const { from, count, ...asked } = body as MoveAsked & MovePart;
            return moveBucketRange(databases, asked, { from, count });
          })
        : finishMoving(databases),
    );
  }
  if (path !== "/__operator/d1" || request.method !== "POST")
    return Response.json({ error: "no such operator call" }, { status: 404 });
  const call = (await request.json()) as GatewayCall;
  const d1 = env[call.binding];
  if (!isD1(d1) || !METHODS.includes(call.method) || call.statements.length === 0)
    return Response.json({ error: `bad operator call (binding ${call.binding})` }, { status: 400 });
  const statements = call.statements.map(({ sql, params }) => d1.prepare(sql).bind(...params));
  const [first] = statements as [D1PreparedStatement];
  return answer(() =>
    call.method === "batch"
      ? d1.batch(statements)
      : call.method === "all"
        ? first.all()
        : call.method === "first"
          ? first.first()
          : call.method === "raw"
            ? first.raw()
            : first.run(),
  );
}

/** `{result}`, or the command's own failure (a constraint, a refused move) for it to report. */
async function answer(run: () => Promise<unknown>): Promise<Response> {
  try {
    return Response.json({ result: await run() });
  } catch (error) {
    return Response.json({ error: error instanceof Error ? error.message : String(error) }, { status: 422 });
  }
}

/** The var that places this local server's requests. */
const DEV_PLACE = "DEV_PLACE";

/**
 * The request as placed by the var DEV_PLACE, read by this local worker alone (never deployed):
 * wrangler gives every local request the same stand-in request.cf (Austin, Texas), so a
 * sign-in placed elsewhere (`session:create -- --latitude --longitude`) would be travel at
 * its first cookie use. Its coordinates and country replace the stand-in's; unset, it is kept.
 */
function placed(request: Request, env: Record<string, unknown>): Request | Response {
  const place = env[DEV_PLACE];
  if (typeof place !== "string" || place === "") return request;
  const [latitude = "", longitude = "", country, ...rest] = place.split(",").map((part) => part.trim());
  // Read by the service's own rule, so that a place it would ignore is refused here.
  const seen = clientContext({ latitude, longitude, country });
  if (seen.latitude === null || (country !== undefined && seen.country === null) || rest.length > 0)
    return Response.json(
      { error: `${DEV_PLACE} is <latitude>,<longitude>[,<country>], e.g. 48.8566,2.3522,FR` },
      { status: 500 },
    );
  const cf = { ...request.cf, latitude, longitude, ...(country === undefined ? {} : { country }) };
  return new Request(request, { cf: cf as IncomingRequestCfProperties });
}

export default {
  fetch(request: Request, env: Env, ctx: ExecutionContext) {
    const vars = env as unknown as Record<string, unknown>;
    const path = new URL(request.url).pathname;
    if (path.startsWith("/__operator/")) return gateway(request, vars, path);
    const local = placed(request, vars);
    return local instanceof Response ? local : worker.fetch(local, env, ctx);
  },
  scheduled: worker.scheduled,
};
