import { wrapD1 } from "../src/db/binding.ts";

// D1 bindings handed to the worker in place of the real one.

export interface CountingD1 {
  db: D1Database;
  /** Calls that went to the database: a statement executed, or one whole batch. */
  roundTrips: number;
}

export function countingD1(d1: D1Database): CountingD1 {
  const counter: CountingD1 = {
    roundTrips: 0,
    db: wrapD1(d1, (call) => {
      counter.roundTrips++;
      return call();
    }),
  };
  return counter;
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

export class InjectedFailure extends Error {
  override name = "InjectedFailure";
}

/** Every statement fails as a driver would, quoting SQL and a secret in its message. */
export function failingD1(d1: D1Database, message: string): D1Database {
  return flakyD1(d1, Number.POSITIVE_INFINITY, () => new InjectedFailure(message)).db;
}
