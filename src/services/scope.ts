import type { ContextCheck } from "../db/client-context.ts";
import { meterD1, uncounted } from "../db/d1.ts";
import { openShards, type Shards } from "../db/shards.ts";
import type { Logged, Writer } from "../db/writes.ts";
import type { ClientContext } from "../domain/client-context.ts";
import { type Instant, instant } from "../domain/clock.ts";
import { type Config, readConfig } from "../domain/config.ts";
import { InvalidInput } from "../domain/invalid-input.ts";
import { readUpstreams, type Upstream } from "../domain/upstreams/config.ts";
import { LEFT_TO_THE_CRON, type Outbox, outboxFor, outletsOf, published, queuedBy } from "./outbox.ts";

// What one request, RPC call, cron run or operator command works with, opened once by its entry point:
// the one place an entry point chooses its databases and its outbox.

export interface Scope {
  config: Config;
  /** The call's one "now" (and idle cutoff). */
  at: Instant;
  /** The deployment's databases, each metered; the one an operation uses is chosen from its token or user. */
  shards: Shards;
  /** Where the call's session events go once written; null without outlets. */
  outbox: Outbox | null;
  /** The client's IP for the security log, where the entry point knows it. */
  clientIp: string | null;
  /** Where the call comes from, judged against its session's last seen context; null: unknown, not judged. */
  context: ClientContext | null;
  /** The admin key making the call (its id, `asAdminKey`), which the security log names as who acted; else null. */
  adminKeyId: string | null;
  /**
   * The one organization the call may act in (an admin key limited to it, `asAdminKey`): its
   * statements touch that organization's sessions alone. Null: any session.
   */
  reach: string | null;
  /**
   * Runs `work` after the answer, kept alive by the entry point; null for the operator's commands (no
   * entry point to keep it). Its round trips are not the answer's: `roundTrips` leaves them out.
   */
  afterAnswer: ((work: () => Promise<unknown>) => void) | null;
  /** The identity providers SSF_UPSTREAMS lists, read when first asked (a refused value: ConfigError). */
  upstreams(): readonly Upstream[];
  /**
   * An operation that must make a round trip before its own by design (an upstream's link before
   * the user's batch, src/services/upstreams/links.ts; an organization's provider read when the
   * isolate does not keep it, src/services/upstreams/named.ts) says so: that trip is the answer's own.
   */
  plannedRoundTrip(): void;
  /** D1 round trips the answer made so far (for the request log). */
  roundTrips(): number;
  /**
   * Those beyond one per database the answer asked: a transient error retried, a moved bucket
   * followed. An operation that asks every database (ending an agent's support sessions) makes
   * none.
   */
  extraRoundTrips(): number;
}

export interface EntryPoint {
  /**
   * Keeps work after the answer alive (`Scope.afterAnswer`: the outbox's sending, an admin
   * key's last use). Absent for the operator's commands: their events are written pending and
   * left to the worker's minute cron, which holds the queue and the signing keys.
   */
  waitUntil?: (promise: Promise<unknown>) => void;
  clientIp?: string | null;
  context?: ClientContext | null;
}

export function openScope(env: Env, entry: EntryPoint = {}): Scope {
  const config = readConfig(env);
  const meters: (() => number)[] = [];
  const shards = openShards(env, (d1) => {
    const meter = meterD1(d1);
    meters.push(meter.roundTrips);
    return meter.db;
  });
  const roundTrips = () => meters.reduce((sum, made) => sum + made(), 0);
  let planned = 0;
  const { waitUntil } = entry;
  const afterAnswer = waitUntil ? (work: () => Promise<unknown>) => waitUntil(uncounted(work)) : null;
  return {
    config,
    at: instant(config),
    shards,
    outbox: afterAnswer ? outboxFor(outletsOf(env, shards), afterAnswer) : LEFT_TO_THE_CRON,
    afterAnswer,
    clientIp: entry.clientIp ?? null,
    context: entry.context ?? null,
    adminKeyId: null,
    reach: null,
    upstreams: () => readUpstreams(env),
    plannedRoundTrip: () => {
      planned++;
    },
    roundTrips,
    extraRoundTrips: () => {
      const asked = meters.filter((made) => made() > 0).length;
      // A planned trip and the operation it precedes make two, on one database or on two.
      const expected = planned === 0 ? asked : Math.max(asked, planned + 1);
      return Math.max(0, roundTrips() - expected + shards.forwards());
    },
  };
}

/**
 * The request's scope as a backend holding an admin key calls (its databases, round trips and
 * outbox stay the request's): no client IP of its own for the security log, the client context
 * it passes (the login flow passes the browser's) or none, the key as who acted, and the
 * organization it is limited to, if any, as the call's reach.
 */
export function asAdminKey(
  scope: Scope,
  adminKeyId: string,
  context: ClientContext | null,
  organization: string | null = null,
): Scope {
  return { ...scope, clientIp: null, context, adminKeyId, reach: organization };
}

/** The scope's context check (src/db/client-context.ts): its context under the configured policies. */
export function contextCheck(scope: Scope): ContextCheck | null {
  const { contextPolicies: policies, travelLimits: travel } = scope.config;
  return scope.context && { context: scope.context, policies, travel, logOnly: false };
}

/**
 * The one way a service writes: `run` gets the writer the security log records (`sessionId`
 * acting, null for the system, from the scope's client IP unless `ipAddress` says otherwise),
 * and once its batch committed the events it logged go to the outbox.
 */
export async function write<T>(
  scope: Scope,
  sessionId: string | null,
  run: (writer: Writer) => Promise<Logged<T>>,
  ipAddress: string | null = scope.clientIp,
): Promise<T> {
  const writer = {
    sessionId,
    ipAddress,
    queued: queuedBy(scope.outbox),
    published: scope.outbox !== null,
    adminKeyId: scope.adminKeyId,
  };
  return published(scope.outbox, await run(writer));
}

/**
 * Runs a service call on `scope`, the one rule for every entry point on whose fault an
 * InvalidInput is. A service applies its rules to the caller's input before it asks a
 * database, so one thrown then, or by a rule that `needsStored`, is the caller's to fix,
 * thrown as it is; any other thrown after a round trip was raised by what a database
 * answered, a stored value: the service's failure (ARCHITECTURE.md, §4), thrown as an Error
 * whose cause it is, for the failure's log line.
 */
export async function judgingInput<T>(scope: Scope, call: (scope: Scope) => Promise<T>): Promise<T> {
  const before = scope.roundTrips();
  try {
    return await call(scope);
  } catch (error) {
    if (error instanceof InvalidInput && !error.needsStored && scope.roundTrips() > before)
      throw new Error("stored value", { cause: error });
    throw error;
  }
}
