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

/** Counts round trips, for the request log. */
export function meterD1(d1: D1Database): { db: D1Database; roundTrips: () => number } {
  let count = 0;
  const db = wrapD1(d1, (call) => {
    count++;
    return call();
  });
  return { db, roundTrips: () => count };
}

// The transient D1 errors Cloudflare documents as safe to retry. Replaying any statement
// this service runs cannot do harm: reads and activity touches are idempotent, a DELETE
// finds nothing the second time (nor does its events INSERT ... SELECT), and a session
// INSERT replays its own id, so it fails on the primary key rather than duplicating.
// More than one retry would only hold the request longer.
const TRANSIENT = [
  "Network connection lost",
  "storage caused object to be reset",
  "reset because its code was updated",
];

function isTransientD1Error(error: unknown): boolean {
  const message = String(error instanceof Error ? error.message : error);
  return TRANSIENT.some((fragment) => message.includes(fragment));
}

export function retryTransientD1(d1: D1Database): D1Database {
  return wrapD1(d1, async (call) => {
    try {
      return await call();
    } catch (error) {
      if (!isTransientD1Error(error)) throw error;
      return call();
    }
  });
}
