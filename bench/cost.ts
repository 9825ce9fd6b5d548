// Cost (bench/bench.ts, phase 2): D1's own meta, summed over the statements of one round
// trip, per operation and size of the user's sessions; each operation as its route runs it.
import { wrapD1 } from "../src/db/d1.ts";
import { listEvents } from "../src/db/events.ts";
import { ACTIVITY_WRITE_INTERVAL_MS, type TokenProof } from "../src/db/liveness.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  endSessionByToken,
  listSessionsByToken,
  listSessionsByUserId,
} from "../src/db/sessions.ts";
import { type BucketShard, openShards } from "../src/db/shards.ts";
import { clientContext } from "../src/domain/client-context.ts";
import type { Instant } from "../src/domain/clock.ts";
import type { readConfig } from "../src/domain/config.ts";
import { hashSecret } from "../src/domain/token.ts";
import { issueSession } from "../src/services/issue-session.ts";
import { openScope } from "../src/services/scope.ts";
import { problems } from "./harness.ts";
import type { Operation } from "./own/index.ts";
import { app, browser, type Seeded, seedUsers } from "./seed.ts";

/** 1 and 50 for the cost table (10 only checks that rows read stay flat); 5 and 50 are also the load's sizes, whose rows written it shows. */
const COST_SIZES = [1, 5, 10, 50];
export const COST_TABLE_SIZES = [1, 50];
/**
 * Users per operation and size in the cost phase; local D1 reports whole milliseconds, so the
 * mean is reported. Each sample costs ~50 ms of the platform proxy's synchronous calls
 * (every `prepare` and `bind` is one), which is most of this phase's time.
 */
const COST_SAMPLES = 4;

interface Meta {
  rowsRead: number;
  rowsWritten: number;
  duration: number;
  statements: number;
  /** Some statement changed the database (D1's `changed_db`). */
  changedDb: boolean;
}

/**
 * A D1 binding that adds up the meta of every result that passes through it, and keeps each
 * round trip's answer (for the own-time loop, which replays them: bench/own/).
 */
function meteredD1(d1: D1Database) {
  const total: Meta = { rowsRead: 0, rowsWritten: 0, duration: 0, statements: 0, changedDb: false };
  const answers: unknown[] = [];
  const add = (result: unknown) => {
    const meta = (result as { meta?: D1Meta } | null)?.meta;
    if (!meta) return;
    total.rowsRead += meta.rows_read;
    total.rowsWritten += meta.rows_written;
    total.duration += meta.duration;
    total.statements++;
    total.changedDb ||= meta.changed_db;
  };
  const db = wrapD1(d1, async (call) => {
    const result = await call();
    answers.push(result);
    for (const item of Array.isArray(result) ? result : [result]) add(item);
    return result;
  });
  return { db, total, answers };
}

export type CostKey =
  | "create"
  | "authenticate"
  | "list"
  | "listTouch"
  | "events"
  | "userList"
  | "revoke"
  | "logout"
  | "logoutAll"
  | "logoutOthers"
  | "whoami"
  | "whoamiBearer"
  | "token"
  | "tokenBearer";
export const COST_LABELS: Record<CostKey, string> = {
  create: "`SessionService.create` (issue one more)",
  authenticate: "`SessionService.authenticate`",
  list: "`GET /auth/sessions`",
  listTouch: "`GET /auth/sessions`, activity due (> 5 min)",
  events: "`GET /auth/events`",
  userList: "`SessionService.listUserSessions`",
  revoke: "`DELETE /auth/sessions/:id` (another session)",
  logout: "`POST /auth/logout`",
  logoutAll: "`DELETE /auth/logout`",
  logoutOthers: "`DELETE /auth/logout?scope=others`",
  whoami: "`GET /auth/whoami`",
  whoamiBearer: "`GET /auth/whoami` as Bearer (an app's session, not judged)",
  token: "`POST /auth/token` (ES256 access token)",
  tokenBearer: "`POST /auth/token` as Bearer (an app's session, not judged)",
};

/** The operations whose sessions are an app's (issued `bearer`), sent as Bearer and never judged; the others are a browser's. */
export const BEARER_KEYS: ReadonlySet<CostKey> = new Set(["whoamiBearer", "tokenBearer"]);
const carrierOf = (key: CostKey) => (BEARER_KEYS.has(key) ? "bearer" : "cookie");

async function proofOf(token: string, carrier: "cookie" | "bearer" = "cookie"): Promise<TokenProof> {
  const [id, secret] = token.split(".") as [string, string];
  return { id, secretHash: await hashSecret(secret), carrier, member: false };
}

/** The instant an operation runs at: the configured idle timeout, no sliding lifetime or step-up. */
function instantOf(config: ReturnType<typeof readConfig>, now: Date): Instant {
  return {
    now,
    idleCutoff: new Date(now.getTime() - config.idleTimeoutSeconds * 1000),
    slidingMaxLifetimeMs: null,
    stepUpCutoff: null,
    slides: false,
    maxLifetimeMs: config.maxLifetimeSeconds * 1000,
  };
}

/**
 * What wrangler's dev server puts in `request.cf` without a network (miniflare's placeholder,
 * Austin): its place too, so that a replayed batch judges travel as the load's requests do.
 */
const DEV_SERVER_CF = { country: "US", asn: 395747, latitude: "30.27130", longitude: "-97.74260" };

/** One statement of a batch as D1 gets it. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/**
 * The one batch `run` sends on the user's database, each statement's SQL and values, for the
 * bare worker to replay (bench/bare/, `POST /batch`). Only noted, never run (its answer has no
 * rows): a recording costs no round trip.
 */
async function recordedBatch(env: Env, caller: Seeded, run: (shard: BucketShard) => Promise<unknown>) {
  let batch: Statement[] = [];
  const statement = (sql: string, params: unknown[]) => ({
    sql,
    params,
    bind: (...values: unknown[]) => statement(sql, values),
  });
  const noting = {
    prepare: (sql: string) => statement(sql, []),
    batch: async (list: Statement[]) => {
      batch = list.map(({ sql, params }) => ({ sql, params }));
      return list.map(() => ({ results: [], success: true, meta: {} }));
    },
  } as unknown as D1Database;
  // Decoding an answer with no rows may fail (a list's aggregate always has one): the batch is noted by then.
  await run(openShards({ ...env, DB: noting }).forSession(caller.id) as BucketShard).catch(() => undefined);
  if (batch.length === 0) problems.push("a batch could not be recorded for a replay row");
  return batch;
}

/**
 * `GET /auth/sessions` (or, given `listEvents`, `GET /auth/events`) for the user holding `own`, as
 * the route runs it for a load request (its browser, the dev server's `request.cf`).
 */
export function listBatchOf(
  env: Env,
  config: ReturnType<typeof readConfig>,
  own: Seeded[],
  list: typeof listSessionsByToken | typeof listEvents = listSessionsByToken,
) {
  const caller = own[0] as Seeded;
  const context = clientContext({ userAgent: caller.userAgent, ...DEV_SERVER_CF });
  return recordedBatch(env, caller, async (shard) =>
    list(
      shard,
      await proofOf(caller.token),
      instantOf(config, new Date()),
      { context, policies: config.contextPolicies, travel: config.travelLimits, logOnly: false },
      { sessionId: caller.id, ipAddress: null, queued: false, published: false, adminKeyId: null },
    ),
  );
}

/**
 * `GET /auth/whoami` or `POST /auth/token` for the user holding `own`, as the route runs it for a
 * load request: `SessionService.authenticate`'s batch, by the session cookie from its browser or as
 * Bearer (whose context is never judged, though the route passes it).
 */
export function authenticateBatchOf(
  env: Env,
  config: ReturnType<typeof readConfig>,
  own: Seeded[],
  carrier: "cookie" | "bearer",
) {
  const caller = own[0] as Seeded;
  const context = clientContext({ userAgent: caller.userAgent, ...DEV_SERVER_CF });
  return recordedBatch(env, caller, async (shard) =>
    authenticate(
      shard,
      await proofOf(caller.token, carrier),
      instantOf(config, new Date()),
      { context, policies: config.contextPolicies, travel: config.travelLimits, logOnly: false },
      { sessionId: caller.id, ipAddress: null, queued: false, published: false, adminKeyId: null },
    ),
  );
}

/**
 * `DELETE /auth/sessions/:id` of the user's second session, by the first, as the route runs it
 * for a load request (its browser, the dev server's `request.cf`).
 */
export function revokeBatchOf(env: Env, config: ReturnType<typeof readConfig>, own: Seeded[]) {
  const [caller, target] = own as [Seeded, Seeded];
  const context = clientContext({ userAgent: caller.userAgent, ...DEV_SERVER_CF });
  return recordedBatch(env, caller, async (shard) =>
    deleteSession(
      shard,
      await proofOf(caller.token),
      target.id,
      { sessionId: caller.id, ipAddress: null, queued: false, published: false, adminKeyId: null },
      instantOf(config, new Date()),
      { context, policies: config.contextPolicies, travel: config.travelLimits, logOnly: false },
    ),
  );
}

/** The same user's list with no token to prove, nothing judged and no activity: `SessionService.listUserSessions`. */
export function userListBatchOf(env: Env, config: ReturnType<typeof readConfig>, own: Seeded[]) {
  const caller = own[0] as Seeded;
  return recordedBatch(env, caller, (shard) =>
    listSessionsByUserId(shard, caller.userId, instantOf(config, new Date())),
  );
}

/** The request (or RPC call) that runs `key` for the user holding `own`, as a client sends it. */
function operationOf(key: CostKey, own: Seeded[], answers: unknown[]): Operation {
  const caller = own[0] as Seeded;
  const http = (method: string, path: string): Operation => ({
    kind: "http",
    method,
    path,
    headers: BEARER_KEYS.has(key) ? app(caller) : browser(caller),
    batches: answers,
  });
  switch (key) {
    case "create":
      return {
        kind: "rpc",
        method: "create",
        arg: { userId: caller.userId, ipAddress: "203.0.113.7" },
        batches: answers,
      };
    case "authenticate":
      return {
        kind: "rpc",
        method: "authenticate",
        arg: caller.token,
        options: { carrier: "cookie", context: { userAgent: caller.userAgent } },
        batches: answers,
      };
    case "list":
    case "listTouch":
      return http("GET", "/auth/sessions");
    case "events":
      return http("GET", "/auth/events");
    case "userList":
      return { kind: "rpc", method: "listUserSessions", arg: caller.userId, batches: answers };
    case "revoke":
      return http("DELETE", `/auth/sessions/${(own[1] ?? caller).id}`);
    case "logout":
      return http("POST", "/auth/logout");
    case "logoutAll":
      return http("DELETE", "/auth/logout");
    case "logoutOthers":
      return http("DELETE", "/auth/logout?scope=others");
    case "whoami":
    case "whoamiBearer":
      return http("GET", "/auth/whoami");
    case "token":
    case "tokenBearer":
      return http("POST", "/auth/token");
  }
}

/**
 * Runs one operation for a user holding `own` sessions, as its route does, on a metered
 * binding; with what a client sends to run it, and the database's answers.
 */
async function runOperation(
  env: Env,
  config: ReturnType<typeof readConfig>,
  key: CostKey,
  own: Seeded[],
): Promise<Meta & { operation: Operation }> {
  const { db: metered, total, answers } = meteredD1(env.DB);
  const caller = own[0] as Seeded;
  // The caller's bucket on the metered database, as the routes get it from the token.
  const db = openShards({ ...env, DB: metered }).forSession(caller.id) as BucketShard;
  const proof = await proofOf(caller.token, carrierOf(key));
  const now = new Date();
  const at = (offsetMs: number) => instantOf(config, new Date(now.getTime() + offsetMs));
  const writer = { sessionId: caller.id, ipAddress: "203.0.113.7", queued: false, published: false, adminKeyId: null };
  // Judged as every request of a browser's session is: from its own browser, nothing changed. A
  // Bearer call passes it too, as its route does, and the batch judges nothing (src/db/authenticated.ts).
  const check = {
    context: clientContext({ userAgent: caller.userAgent }),
    policies: config.contextPolicies,
    travel: config.travelLimits,
    logOnly: false,
  };
  switch (key) {
    case "create": {
      // One more session for this user, who holds `own.length`: what a login costs them.
      await issueSession(
        { ...openScope({ ...env, DB: metered }), config, outbox: null },
        {
          userId: caller.userId,
          ipAddress: "203.0.113.7",
        },
      );
      break;
    }
    case "authenticate":
    // Both routes' one batch is authenticate's; the token route then signs, in the worker.
    case "whoami":
    case "whoamiBearer":
    case "token":
    case "tokenBearer":
      await authenticate(db, proof, at(0), check, writer);
      break;
    case "list":
      await listSessionsByToken(db, proof, at(0), check, writer);
      break;
    case "listTouch":
      await listSessionsByToken(db, proof, at(ACTIVITY_WRITE_INTERVAL_MS + 1000), check, writer);
      break;
    case "events":
      await listEvents(db, proof, at(0), check, writer);
      break;
    case "userList":
      await listSessionsByUserId(db, caller.userId, at(0));
      break;
    case "revoke":
      await deleteSession(db, proof, (own[1] ?? caller).id, writer, at(0), check);
      break;
    case "logout":
      await endSessionByToken(db, proof, writer, at(0));
      break;
    case "logoutAll":
      await endAllSessionsByToken(db, proof, writer, at(0), check);
      break;
    case "logoutOthers":
      await endOtherSessionsByToken(db, proof, writer, at(0), check);
      break;
  }
  return { ...total, operation: operationOf(key, own, answers) };
}

export interface Cost {
  key: CostKey;
  n: number;
  statements: number;
  rowsRead: number;
  rowsWritten: number;
  /** Mean over COST_SAMPLES users of D1's summed `duration`, ms. */
  duration: number;
  changedDb: boolean;
  /** One sample's request and recorded answers, for the own-time loop. */
  operation: Operation;
}

export async function measureCosts(env: Env, config: ReturnType<typeof readConfig>): Promise<Cost[]> {
  const costs: Cost[] = [];
  for (const n of COST_SIZES) {
    for (const key of Object.keys(COST_LABELS) as CostKey[]) {
      // Each sample on its own user, all at once: D1's meta is per statement, unmoved by the
      // others, and the platform proxy's latency overlaps instead of adding up.
      const seeded = await seedUsers(env.DB, config, COST_SAMPLES, n, carrierOf(key));
      const samples = await Promise.all(seeded.map((own) => runOperation(env, config, key, own)));
      const first = samples[0] as (typeof samples)[number];
      const rowsRead = Math.max(...samples.map((s) => s.rowsRead));
      const rowsWritten = Math.max(...samples.map((s) => s.rowsWritten));
      // A range scan reads one index entry past the user's range unless the user is the last
      // in the index: up to one row per statement apart between users, nothing more.
      if (samples.some((s) => rowsRead - s.rowsRead > s.statements || rowsWritten !== s.rowsWritten)) {
        const seen = samples.map((s) => `${s.rowsRead}/${s.rowsWritten}`).join(", ");
        problems.push(`${key} at ${n}: rows read/written differ between users of the same size: ${seen}`);
      }
      costs.push({
        key,
        n,
        statements: first.statements,
        rowsRead,
        rowsWritten,
        duration: samples.reduce((sum, s) => sum + s.duration, 0) / samples.length,
        changedDb: samples.some((s) => s.changedDb),
        operation: first.operation,
      });
    }
  }
  return costs;
}
