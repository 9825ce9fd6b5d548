import { AsyncLocalStorage } from "node:async_hooks";
import { DatabaseUnavailable } from "../domain/errors.ts";

// Wrappers around the D1 binding. Every call that goes to the database (a statement's
// first/all/run/raw, a batch, an exec) passes through `around`, so a wrapper sees each
// round trip exactly once, and wrappers compose.

type RoundTrip = <T>(call: () => Promise<T>) => Promise<T>;

const EXECUTING = new Set<PropertyKey>(["first", "all", "run", "raw"]);

export function wrapD1(d1: D1Database, around: RoundTrip): D1Database {
  // A batch must be handed the wrapped binding's own statements, not our proxies.
  const inner = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, property) {
        if (property === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        if (!EXECUTING.has(property)) return value.bind(target);
        return (...args: unknown[]) => around(() => value.apply(target, args));
      },
    });
    inner.set(proxy, statement);
    return proxy;
  };
  return new Proxy(d1, {
    get(target, property) {
      if (property === "prepare") return (query: string) => wrap(target.prepare(query));
      if (property === "batch") {
        return (statements: D1PreparedStatement[]) =>
          around(() => target.batch(statements.map((statement) => inner.get(statement) ?? statement)));
      }
      const value = Reflect.get(target, property, target);
      if (property === "exec") return (query: string) => around(() => target.exec(query));
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const failedOn = new WeakMap<object, string>();

/** Remembers which D1 binding an error came from, for the log line of an unexpected error. */
export function namingFailures(d1: D1Database, binding: string): D1Database {
  return wrapD1(d1, async (call) => {
    try {
      return await call();
    } catch (error) {
      if (typeof error === "object" && error !== null) failedOn.set(error, binding);
      throw error;
    }
  });
}

/** The D1 binding an error (or an error it was the cause of, as Drizzle wraps them) came from. */
export function d1BindingOfFailure(error: unknown): string | null {
  for (let at = error; typeof at === "object" && at !== null; at = (at as { cause?: unknown }).cause) {
    const binding = failedOn.get(at);
    if (binding) return binding;
  }
  return null;
}

// Set while work after the answer runs: by async context, since that work starts at once, on the
// same metered databases, while the answer is still being written and before the request log
// reads the count.
const afterTheAnswer = new AsyncLocalStorage<true>();

/** Runs `work` as work after the answer (the outbox, a key's last use): `meterD1` does not count its round trips. */
export function uncounted<T>(work: () => Promise<T>): Promise<T> {
  return afterTheAnswer.run(true, work);
}

/** Counts the round trips the answer made, for the request log. */
export function meterD1(d1: D1Database): { db: D1Database; roundTrips: () => number } {
  let count = 0;
  const db = wrapD1(d1, (call) => {
    if (!afterTheAnswer.getStore()) count++;
    return call();
  });
  return { db, roundTrips: () => count };
}

// The transient D1 errors Cloudflare documents as safe to retry, SQLite's lock errors
// (SQLITE_BUSY and its extended codes such as SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED: another
// connection held the database, and the statement or batch did not run, so a replay is
// safe), and D1's overload errors ("D1 DB is overloaded. Too many requests queued." /
// "... Requests queued for too long.").
const TRANSIENT =
  /Network connection lost|storage caused object to be reset|reset because its code was updated|database (table )?is locked|SQLITE_BUSY|SQLITE_LOCKED/;
const OVERLOADED = /overloaded|requests queued/i;

const messageOf = (error: unknown) => String(error instanceof Error ? error.message : error);
const isTransient = (error: unknown) => TRANSIENT.test(messageOf(error));
const isOverloaded = (error: unknown) => OVERLOADED.test(messageOf(error));

/**
 * Retries a transient error once, replaying the same call with the same bound values. The
 * first attempt may have committed with only its answer lost; the statements are written
 * so that a replay is harmless and its answer still true (src/db/writes.ts): reads and the
 * activity touch are idempotent, a DELETE and its events INSERT ... SELECT find nothing the
 * second time, a session INSERT does nothing on its own id, and every write reads back the
 * events tagged with its request id. An overloaded database is not retried (that would only
 * lengthen its queue); more than one retry would only hold the request longer.
 */
export function retryTransientD1(d1: D1Database): D1Database {
  return wrapD1(d1, async (call) => {
    try {
      return await call();
    } catch (error) {
      if (isOverloaded(error)) throw new DatabaseUnavailable();
      if (!isTransient(error)) throw error;
    }
    try {
      return await call();
    } catch (error) {
      if (isOverloaded(error) || isTransient(error)) throw new DatabaseUnavailable();
      throw error;
    }
  });
}
