// The benchmark's measure of the worker's own time per request (`npm run bench`): inside
// workerd, with no dev server and no network in between, `fetch` of the bare worker
// (bench/bare/) or of the service's app, called `n` times in a loop by one request.
// A worker's clock stands still while it computes, so the client times the whole request;
// `n` large enough makes the one outer request negligible. Never deployed.
//
// GET  /?target=bare|service&path=<path>&n=<n>   a path without a database
// GET  /?target=sign&n=<n>   the access token's signing alone (`signAccessToken`: its claims, an
//      ES256 signature by WebCrypto, the compact JWS), with the key set ACCESS_TOKEN_* configure
// POST /?n=<n> with an `Operation`: an operation with a database, whose D1 answers are the
//      ones the benchmark recorded for it on the real database (`batches`), replayed: the
//      CPU the worker spends on the operation (token, SQL, results, JSON), without D1's.
// POST /?n=<n>&part=db|service with a list's `Operation` (`GET /auth/sessions`, `GET /auth/events`,
//      `listUserSessions`): only its first layers, the token proven once before the loop: `db`,
//      the database function (its statements, D1's answer replayed and decoded); `service`, with
//      the service's work on it. The whole operation less `service` is the entry point's: the request's
//      middleware, the token's proof, the JSON and the response.
import { listEvents } from "../../src/db/events.ts";
import { listSessionsByToken, listSessionsByUserId } from "../../src/db/sessions.ts";
import { readAccessTokenIssuer, signAccessToken } from "../../src/domain/access-token.ts";
import { clientContext } from "../../src/domain/client-context.ts";
import { app } from "../../src/http/app.ts";
import { type AuthenticateOptions, SessionService } from "../../src/rpc/session-service.ts";
import { listOwnEvents, listOwnSessions } from "../../src/services/own-sessions.ts";
import { contextCheck, openScope } from "../../src/services/scope.ts";
import { readSessionToken } from "../../src/services/session-token.ts";
import { listUserSessions } from "../../src/services/user-sessions.ts";
import bare from "../bare/index.ts";

export type Operation =
  | { kind: "http"; method: string; path: string; headers: Record<string, string>; batches: unknown[] }
  | {
      kind: "rpc";
      method: "create" | "authenticate" | "listUserSessions";
      arg: unknown;
      options?: unknown;
      batches: unknown[];
    };

/** A D1 binding that answers every batch with the next recorded answer, in a cycle. */
function replayingD1(batches: unknown[]): D1Database {
  let next = 0;
  const statement = { bind: () => statement };
  return {
    prepare: () => statement,
    batch: async () => batches[next++ % batches.length],
  } as unknown as D1Database;
}

async function runOperation(operation: Operation, n: number, env: Env, ctx: ExecutionContext): Promise<number[]> {
  const replayed = { ...env, DB: replayingD1(operation.batches) };
  const statuses = new Set<number>();
  for (let i = 0; i < n; i++) {
    if (operation.kind === "http") {
      const request = new Request(new URL(operation.path, "https://bench.example"), operation);
      const response = await app.fetch(request, replayed, ctx);
      await response.arrayBuffer();
      statuses.add(response.status);
    } else {
      const service = new SessionService(ctx, replayed);
      const answer =
        operation.method === "create"
          ? await service.create(operation.arg as Parameters<SessionService["create"]>[0])
          : operation.method === "listUserSessions"
            ? await service.listUserSessions(operation.arg as string)
            : await service.authenticate(operation.arg as string, operation.options as AuthenticateOptions);
      statuses.add(answer ? 200 : 401);
    }
  }
  return [...statuses];
}

export type Part = "db" | "service";

/** The first layers of a list operation `n` times, its D1 answers replayed (see the header). */
async function runPart(operation: Operation, part: Part, n: number, env: Env): Promise<number[]> {
  const replayed = { ...env, DB: replayingD1(operation.batches) };
  const headers = new Headers(operation.kind === "http" ? operation.headers : {});
  const scope = openScope(replayed, { context: clientContext({ userAgent: headers.get("User-Agent") }) });
  const cookieHeader = headers.get("Cookie") ?? undefined;
  const cookie = /=([^;]*)/.exec(cookieHeader ?? "")?.[1];
  const token = await readSessionToken(scope.shards, cookie, "cookie", {
    header: cookieHeader,
    name: scope.config.cookieName,
  });
  const writer = {
    sessionId: token?.proof.id ?? null,
    ipAddress: null,
    queued: false,
    published: false,
    adminKeyId: null,
  };
  const kind = operation.kind === "rpc" ? operation.method : operation.path;
  const run = async (): Promise<unknown> => {
    if (kind === "listUserSessions") {
      const userId = (operation as { arg: string }).arg;
      if (part === "service") return listUserSessions(scope, userId);
      return listSessionsByUserId(await scope.shards.forUser(userId), userId, scope.at);
    }
    if (!token) return null;
    if (kind === "/auth/sessions")
      return part === "service"
        ? listOwnSessions(scope, token)
        : listSessionsByToken(token.shard, token.proof, scope.at, contextCheck(scope), writer);
    if (kind === "/auth/events")
      return part === "service"
        ? listOwnEvents(scope, token)
        : listEvents(token.shard, token.proof, scope.at, contextCheck(scope), writer);
    return null;
  };
  const statuses = new Set<number>();
  for (let i = 0; i < n; i++) statuses.add((await run()) ? 200 : 500);
  return [...statuses];
}

/** `signAccessToken` `n` times for one session, as `POST /auth/token` calls it once its batch proved the session: [200], or [404] when access tokens are off. */
async function sign(n: number, env: Env): Promise<number[]> {
  const issuer = readAccessTokenIssuer(env);
  if (!issuer) return [404];
  const subject = {
    sessionId: "s".repeat(22),
    userId: "bench-user",
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
    authenticatedAt: new Date().toISOString(),
    factors: [],
    assuranceLevel: null,
    organization: null,
  };
  let length = 0;
  for (let i = 0; i < n; i++) length += (await signAccessToken(issuer, subject, new Date())).token.length;
  return [length > 0 ? 200 : 500];
}

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? 1);
    const part = url.searchParams.get("part") as Part | null;
    if (request.method === "POST" && part) return Response.json(await runPart(await request.json(), part, n, env));
    if (request.method === "POST") return Response.json(await runOperation(await request.json(), n, env, ctx));
    if (url.searchParams.get("target") === "sign") return Response.json(await sign(n, env));
    const target = url.searchParams.get("target") === "service" ? app : bare;
    const inner = new URL(url.searchParams.get("path") ?? "/", url);
    const statuses = new Set<number>();
    for (let i = 0; i < n; i++) {
      const response = await target.fetch(new Request(inner), env, ctx);
      await response.arrayBuffer();
      statuses.add(response.status);
    }
    return Response.json([...statuses]);
  },
} satisfies ExportedHandler<Env>;
