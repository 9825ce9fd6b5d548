import { fillPlaceholders, type Placeholder, type Query, type SQLWrapper, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { Database } from "./client.ts";

// Rendering a statement to SQL text is most of the CPU a request spends in drizzle (BENCHMARKS.md,
// Reading). The statements every request by token runs (src/db/authenticated.ts) and the lists'
// are rendered once per isolate and shape of their input by drizzle's dialect, with a placeholder
// for each value, and each call only fills in its values (`fillPlaceholders`). No caller's text
// can reach another's, by construction: a statement is made as its module loads (`compiled`,
// called nowhere else, beside no module-level `let`: test/checks/compiled-at-load.grit), so its
// builder holds nothing of a request; the builder reads nothing but its input, and the key is
// that very input as JSON, which carries all of it (`Keyed`); each value of a call is in it as a
// placeholder, which holds the value's name, never the value. drizzle's batch takes only its own
// query builders, each rendered anew (a prepared statement cannot join it, drizzle-orm#2197), so
// these run through D1's own batch: `prepare(text).bind(...values)`.

const dialect = new SQLiteAsyncDialect();

/**
 * What a compiled statement's input may hold: only what its JSON, the key of its renders, carries
 * whole. No function, map or class instance (JSON drops or flattens them), but a placeholder
 * (its name) and a `Date` (its instant).
 */
type Keyed<T> = { [K in keyof T]: KeyedValue<T[K]> };
type KeyedValue<T> = T extends Placeholder | Date | string | number | boolean | null | undefined
  ? T
  : T extends (...args: never[]) => unknown
    ? never
    : Keyed<T>;

/** Builds one statement from its input, and from nothing else (`compiled`). */
type Builder<I> = (db: Database, input: I) => SQLWrapper;

/** A statement and its renders, each shape's text and parameters (placeholders among them). */
class Compiled<I> {
  readonly build: Builder<I>;
  readonly #renders = new Map<string, Query>();

  constructor(build: Builder<I>) {
    this.build = build;
  }

  rendered(db: Database, { input, shape }: Shaped<I>): Query {
    let query = this.#renders.get(shape);
    if (!query) {
      query = dialect.sqlToQuery(this.build(db, input).getSQL());
      this.#renders.set(shape, query);
    }
    return query;
  }
}

/** A statement rendered once per shape of its input: made by `compiled` alone. */
export type { Compiled };

/**
 * The statement `build` builds, rendered once per shape of its input. Made as its module loads,
 * at its top level (test/checks/compiled-at-load.grit): `build` is the same function on every
 * call, and holds nothing of one. An input that is not `Keyed` asks for an argument that cannot
 * be given (`never`): "Expected 2 arguments" (its parameters typed, so that its input is known).
 */
export function compiled<I>(build: Builder<I>, ..._keyed: [I] extends [Keyed<I>] ? [] : [never]): Compiled<I> {
  return new Compiled(build);
}

/** A statement's input on placeholders, and its shape: that input as JSON, the key of its render. */
export interface Shaped<I> {
  input: I;
  shape: string;
}

/**
 * `input` (each value that changes per call a placeholder, `placeholders`) with its shape,
 * derived: its constants and which of its fields are placeholders, as JSON (a placeholder is its
 * name). Made once per call, for all the statements built on the same input.
 */
export function shaped<I>(input: I): Shaped<I> {
  return { input, shape: JSON.stringify(input) };
}

/** One call of a compiled statement. */
export interface Call<I> {
  statement: Compiled<I>;
  /** The input on placeholders, and its shape. */
  once: Shaped<I>;
  /** This call's value of each placeholder. */
  values: Record<string, unknown>;
  /** The same input on this call's own values: what `once` with `values` must send (`reportSent`). */
  called: I;
}

/** Told of a compiled statement as sent: its call and database, and its text and values as D1 gets them. */
export type Report = <I>(call: Call<I>, db: Database, sent: Query) => void;

let report: Report | null = null;

/**
 * From now on (null: no more), each compiled statement sent is also told to `to`, for the
 * tests to compare with a fresh render of its call (test/fresh-renders.ts, on in every test
 * file): a builder that branches on a placeholder as if it were its value sends what its values
 * would not.
 */
export function reportSent(to: Report | null): void {
  report = to;
}

function sent<I>(db: Database, call: Call<I>): Query {
  const query = call.statement.rendered(db, call.once);
  const sent = { sql: query.sql, params: fillPlaceholders(query.params, call.values) };
  report?.(call, db, sent);
  return sent;
}

/** A statement for `batchCompiled`: its text and values, and what it answers of D1's result. */
export interface Batched<R> {
  query: Query;
  answer: (result: D1Result<Record<string, unknown>>) => R;
}

/** A compiled statement that answers nothing (UPDATE, DELETE): D1's result. */
export function compiledRun<I>(db: Database, call: Call<I>): Batched<D1Result> {
  return { query: sent(db, call), answer: (result) => result };
}

/** A compiled statement that answers rows (RETURNING), each an object by column name, as D1 gives them. */
export function compiledAll<I>(db: Database, call: Call<I>): Batched<Record<string, unknown>[]> {
  return { query: sent(db, call), answer: (result) => result.results };
}

/** What each statement of a batch answers, under its name; undefined when it was left out. */
type Answers<T> = { [K in keyof T]: T[K] extends Batched<infer R> ? R : undefined };

/**
 * Runs the statements given (in the record's order; null: left out) as one D1 batch (one
 * round trip, one transaction), and answers each one's result under its name, as `batchNamed`
 * does for drizzle's builders.
 */
export async function batchCompiled<T extends Record<string, Batched<unknown> | null>>(
  db: Database,
  statements: T,
): Promise<Answers<T>> {
  const named = Object.entries(statements).filter((entry): entry is [string, Batched<unknown>] => entry[1] !== null);
  const d1 = db.$client;
  const prepared = named.map(([, { query }]) => d1.prepare(query.sql).bind(...query.params));
  const results = prepared.length === 0 ? [] : await d1.batch<Record<string, unknown>>(prepared);
  return Object.fromEntries(
    named.map(([name, { answer }], i) => [name, answer(results[i] as D1Result<Record<string, unknown>>)]),
  ) as Answers<T>;
}

/**
 * The placeholders of compiled statements, and this call's value of each (`values`): `value`
 * stands where the builders take a `T`, which they only put into the SQL, where drizzle renders
 * a placeholder as a parameter (the one cast: a placeholder has no type of the value it stands
 * for; a builder that compared it would compare the placeholder, alike on every call, which
 * test/fresh-renders.ts tells); `instant` stands for an instant (`When`), its epoch milliseconds.
 */
export function placeholders() {
  const values: Record<string, unknown> = {};
  return {
    values,
    value<T>(name: string, value: T): T {
      values[name] = value;
      return sql.placeholder(name) as T;
    },
    instant(name: string, value: Date): Placeholder {
      values[name] = value.getTime();
      return sql.placeholder(name);
    },
  };
}

/** An instant as a statement compares it with a column: a `Date`, or a placeholder for its epoch milliseconds. */
export type When = Date | Placeholder;

/** What a statement puts in its SQL for `when`: its epoch milliseconds, or the placeholder. */
export function millis(when: When): number | Placeholder {
  return when instanceof Date ? when.getTime() : when;
}
