// D1 bindings that wrap the real one: one counts round trips, one fails every call.

const EXECUTING = new Set<PropertyKey>(["first", "all", "run", "raw"]);
const real = new WeakMap<object, D1PreparedStatement>();

export interface CountingD1 {
  db: D1Database;
  /** Calls that each went to the database: a statement executed, or one whole batch. */
  roundTrips: number;
}

export function countingD1(d1: D1Database): CountingD1 {
  const counter: CountingD1 = { db: d1, roundTrips: 0 };
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, property) {
        if (property === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        const value = Reflect.get(target, property, target);
        if (typeof value !== "function") return value;
        if (EXECUTING.has(property)) counter.roundTrips++;
        return value.bind(target);
      },
    });
    real.set(proxy, statement);
    return proxy;
  };
  counter.db = new Proxy(d1, {
    get(target, property) {
      if (property === "prepare") return (query: string) => wrap(target.prepare(query));
      if (property === "batch") {
        return (statements: D1PreparedStatement[]) => {
          counter.roundTrips++;
          return target.batch(statements.map((statement) => real.get(statement) ?? statement));
        };
      }
      if (property === "exec") counter.roundTrips++;
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return counter;
}

export class InjectedFailure extends Error {
  override name = "InjectedFailure";
}

/** Every statement fails as a driver would, quoting SQL and a secret in its message. */
export function failingD1(message: string): D1Database {
  const fail = () => Promise.reject(new InjectedFailure(message));
  const statement: D1PreparedStatement = {
    bind: () => statement,
    first: fail,
    all: fail,
    run: fail,
    raw: fail,
  } as unknown as D1PreparedStatement;
  return {
    prepare: () => statement,
    batch: fail,
    exec: fail,
    dump: fail,
    withSession: () => {
      throw new InjectedFailure(message);
    },
  } as unknown as D1Database;
}
