import { fillPlaceholders, type Placeholder, type Query, type SQLWrapper, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { Database } from "./client.ts";

// Rendering a statement to SQL text is most of the CPU a request spends in drizzle (BENCHMARKS.md,
// Reading). The statements every request by token runs (src/db/authenticated.ts) and the lists'
// are rendered once per isolate, builder and shape by drizzle's dialect, with a placeholder for
// each value, and each call only fills in its values (`fillPlaceholders`): a statement's key is
// derived, its builder's identity and its input's shape, never a name written by hand. drizzle's
// batch takes only its own query builders, each rendered anew (a prepared statement cannot join
// it, drizzle-orm#2197), so these run through D1's own batch: `prepare(text).bind(...values)`.

const dialect = new SQLiteAsyncDialect();

/**
 * Builds one statement from its input: a function of its module (or made once as it loads), so
 * the same function on every call, which keys the statement's renders with its input's shape.
 */
export type Builder<I> = (db: Database, input: I) => SQLWrapper;

/** Each builder's renders: each shape's text and parameters, placeholders among them. */
const rendered = new WeakMap<Builder<never>, Map<string, Query>>();

/** A statement's input on placeholders, and its shape: what changes the SQL text built on it. */
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

/** One statement rendered once per builder and shape. */
export interface Compiled<I> {
  build: Builder<I>;
  /** The input on placeholders, and its shape: a statement of another builder or shape is rendered anew. */
  once: Shaped<I>;
  /** This call's value of each placeholder. */
  values: Record<string, unknown>;
  /** The same input on this call's own values: what `once` with `values` must send (`reportSent`). */
  called: I;
}

/** Told of a compiled statement as sent: what it was compiled from and on which database, and its text and values as D1 gets them. */
export type Report = <I>(compiled: Compiled<I>, db: Database, sent: Query) => void;

let report: Report | null = null;

/**
 * From now on (null: no more), each compiled statement sent is also told to `to`, for the
 * tests to compare with a fresh render of its call (test/fresh-renders.ts, on in every test
 * file): a builder that reads what its input does not carry, or a value that is no
 * placeholder, sends the first caller's statement to the next.
 */
export function reportSent(to: Report | null): void {
  report = to;
}

function compiled<I>(db: Database, call: Compiled<I>): Query {
  const { build, once, values } = call;
  let shapes = rendered.get(build);
  if (!shapes) {
    shapes = new Map();
    rendered.set(build, shapes);
  }
  let query = shapes.get(once.shape);
  if (!query) {
    query = dialect.sqlToQuery(build(db, once.input).getSQL());
    shapes.set(once.shape, query);
  }
  const sent = { sql: query.sql, params: fillPlaceholders(query.params, values) };
  report?.(call, db, sent);
  return sent;
}

/** A statement for `batchCompiled`: its text and values, and what it answers of D1's result. */
export interface Statement<R> {
  query: Query;
  answer: (result: D1Result<Record<string, unknown>>) => R;
}

/** A compiled statement that answers nothing (UPDATE, DELETE): D1's result. */
export function compiledRun<I>(db: Database, statement: Compiled<I>): Statement<D1Result> {
  return { query: compiled(db, statement), answer: (result) => result };
}

/** A compiled statement that answers rows (RETURNING), each an object by column name, as D1 gives them. */
export function compiledAll<I>(db: Database, statement: Compiled<I>): Statement<Record<string, unknown>[]> {
  return { query: compiled(db, statement), answer: (result) => result.results };
}

/** What each statement of a batch answers, under its name; undefined when it was left out. */
type Answers<T> = { [K in keyof T]: T[K] extends Statement<infer R> ? R : undefined };

/**
 * Runs the statements given (in the record's order; null: left out) as one D1 batch (one
 * round trip, one transaction), and answers each one's result under its name, as `batchNamed`
 * does for drizzle's builders.
 */
export async function batchCompiled<T extends Record<string, Statement<unknown> | null>>(
  db: Database,
  statements: T,
): Promise<Answers<T>> {
  const named = Object.entries(statements).filter((entry): entry is [string, Statement<unknown>] => entry[1] !== null);
  const d1 = db.$client;
  const prepared = named.map(([, { query }]) => d1.prepare(query.sql).bind(...query.params));
  const results = prepared.length === 0 ? [] : await d1.batch<Record<string, unknown>>(prepared);
  return Object.fromEntries(
    named.map(([name, { answer }], i) => [name, answer(results[i] as D1Result<Record<string, unknown>>)]),
  ) as Answers<T>;
}

/**
 * The placeholders of statements rendered once, and this call's value of each (`values`):
 * `value` stands where the builders take a `T`, which they only put into the SQL, where drizzle
 * renders a placeholder as a parameter (the one cast: a placeholder has no type of the value
 * it stands for); `instant` stands for an instant (`When`), its value the epoch milliseconds.
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
