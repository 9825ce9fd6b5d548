import { wrapD1 } from "../src/db/d1.ts";

// D1 bindings handed to the worker in place of the real one.

export interface CountingD1 {
  db: D1Database;
  /** Calls that went to the database: a statement executed, or one whole batch. */
  roundTrips: number;
}

export function countingD1(d1: D1Database): CountingD1 {
  return flakyD1(d1, 0, () => new Error("never thrown"));
}

/** Rows D1 says a round trip's answer wrote or read (`meta.rows_written`, index entries included; `meta.rows_read`), whatever its shape. */
function rowsBy(answer: unknown, key: "rows_written" | "rows_read"): number {
  if (Array.isArray(answer)) return answer.reduce((sum: number, part) => sum + rowsBy(part, key), 0);
  const meta = (answer as { meta?: Partial<Record<typeof key, number>> } | null)?.meta;
  return meta?.[key] ?? 0;
}

/** A counting wrapper around each database, for `callWith`; counts are per binding. */
export function countingShards(bindings: Record<string, D1Database>) {
  let written = 0;
  let read = 0;
  let statements = 0;
  const counters = Object.fromEntries(
    Object.entries(bindings).map(([name, d1]) => {
      const counter = countingD1(
        wrapD1(d1, async (call) => {
          const answer = await call();
          written += rowsBy(answer, "rows_written");
          read += rowsBy(answer, "rows_read");
          // A batch answers one result (with its meta) per statement; `raw()` of one statement, an array of rows.
          const batch = Array.isArray(answer) && answer.every((part) => (part as { meta?: unknown } | null)?.meta);
          statements += batch ? answer.length : 1;
          return answer;
        }),
      );
      return [name, counter];
    }),
  );
  return {
    env: Object.fromEntries(Object.entries(counters).map(([name, counter]) => [name, counter.db])) as Partial<Env>,
    /** Rows written over every round trip so far, as D1 reports them. */
    rowsWritten: () => written,
    /** Rows read over every round trip so far, as D1 reports them. */
    rowsRead: () => read,
    /** Statements run over every round trip so far. */
    statements: () => statements,
    /** Round trips per binding, leaving out bindings that had none. */
    roundTrips: (): Record<string, number> =>
      Object.fromEntries(
        Object.entries(counters)
          .filter(([, counter]) => counter.roundTrips > 0)
          .map(([name, counter]) => [name, counter.roundTrips]),
      ),
  };
}

/** Fails the first `failures` round trips with `error`, then behaves normally. */
export function flakyD1(d1: D1Database, failures: number, error: () => Error): CountingD1 {
  const counter: CountingD1 = {
    roundTrips: 0,
    db: wrapD1(d1, (call) => {
      counter.roundTrips++;
      return counter.roundTrips <= failures ? Promise.reject(error()) : call();
    }),
  };
  return counter;
}

/** Where a round trip fails: before it reaches D1, or after D1 committed it (the answer is lost). */
export type Fault = "before" | "after";

/** What D1 says when the connection drops; one of the errors Cloudflare documents as retryable. */
export const CONNECTION_LOST = "D1_ERROR: Network connection lost.";

/**
 * Fails round trip n as `plan[n]` says, with `message`; round trips past the plan behave
 * normally. "after" lets the call run (a batch commits) and then throws, as when the
 * connection drops on the way back.
 */
export function faultyD1(d1: D1Database, plan: readonly Fault[], message = CONNECTION_LOST): CountingD1 {
  const counter: CountingD1 = {
    roundTrips: 0,
    db: wrapD1(d1, async (call) => {
      const fault = plan[counter.roundTrips++];
      if (fault === "before") throw new Error(message);
      const result = await call();
      if (fault === "after") throw new Error(message);
      return result;
    }),
  };
  return counter;
}

/**
 * Fails the batches `picks` (by their statements' SQL) as `plan` says, counted over those batches
 * alone, so that a fault meant for one write lands on it whatever else the database ran first;
 * every other call runs as it would. `roundTrips` counts the batches picked.
 */
export function faultyBatches(
  d1: D1Database,
  picks: (sql: string) => boolean,
  plan: readonly Fault[],
  message = CONNECTION_LOST,
): CountingD1 {
  const counter: CountingD1 = {
    roundTrips: 0,
    db: new Proxy(d1, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property !== "batch") return typeof value === "function" ? value.bind(target) : value;
        return async (statements: D1PreparedStatement[]) => {
          // workerd's statement keeps its SQL text as `statement`.
          if (!statements.some((statement) => picks(String((statement as { statement?: unknown }).statement))))
            return target.batch(statements);
          const fault = plan[counter.roundTrips++];
          if (fault === "before") throw new Error(message);
          const result = await target.batch(statements);
          if (fault === "after") throw new Error(message);
          return result;
        };
      },
    }),
  };
  return counter;
}

export class InjectedFailure extends Error {
  override name = "InjectedFailure";
}

/** Every statement fails as a driver would, quoting SQL and a secret in its message. */
export function failingD1(d1: D1Database, message: string): D1Database {
  return flakyD1(d1, Number.POSITIVE_INFINITY, () => new InjectedFailure(message)).db;
}

export interface RecordedStatement {
  sql: string;
  params: unknown[];
}

/** Records every statement prepared through it, with the values bound to it. */
export function recordingD1(d1: D1Database): { db: D1Database; statements: RecordedStatement[] } {
  const statements: RecordedStatement[] = [];
  const db = new Proxy(d1, {
    get(target, property) {
      if (property === "prepare") {
        return (sql: string) => {
          const statement = target.prepare(sql);
          return new Proxy(statement, {
            get(inner, key) {
              if (key === "bind") {
                return (...params: unknown[]) => {
                  statements.push({ sql, params });
                  return inner.bind(...params);
                };
              }
              const value = Reflect.get(inner, key, inner);
              return typeof value === "function" ? value.bind(inner) : value;
            },
          });
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { db, statements };
}

/** D1 refuses a statement that binds more than this many values (Cloudflare's D1 limits). */
export const D1_MAX_BOUND_PARAMETERS = 100;

/** A statement that bound more values than D1 takes: its text and how many. */
export interface Overbound {
  sql: string;
  count: number;
}

const LIMITED = Symbol.for("session-service.limitBoundParameters");

/**
 * From now on, every statement bound on `d1`'s kind of binding, in the whole isolate (the tests'
 * own and the worker's, drizzle's and compiled ones), fails as D1 would refuse it when it binds
 * more than D1 takes; each is also pushed to `into`, for a file to fail on even when a caller
 * swallowed the error. Called again (the next file, in the same isolate), only `into` changes.
 */
export function limitBoundParameters(d1: D1Database, into: Overbound[]): void {
  type Bind = (this: { statement?: unknown }, ...values: unknown[]) => unknown;
  const prototype = Object.getPrototypeOf(d1.prepare("SELECT 1")) as { bind: Bind; [LIMITED]?: Overbound[] };
  const limited = prototype[LIMITED] !== undefined;
  prototype[LIMITED] = into;
  if (limited) return;
  const bind = prototype.bind;
  prototype.bind = function (...values) {
    if (values.length > D1_MAX_BOUND_PARAMETERS) {
      prototype[LIMITED]?.push({ sql: String(this.statement).slice(0, 300), count: values.length });
      throw new Error(`D1_ERROR: too many SQL variables (${values.length} bound, D1 takes ${D1_MAX_BOUND_PARAMETERS})`);
    }
    return bind.apply(this, values);
  };
}
