import { fillPlaceholders, type Query, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { Database } from "./client.ts";

// Rendering a statement to SQL text is most of the CPU a request spends in drizzle (BENCHMARKS.md,
// Reading). The statements every request by token runs (src/db/authenticated.ts) and the lists'
// are rendered once per isolate and shape, with a placeholder for each value, and each call only
// fills in its values: the SQL D1 gets is the same, its values bound as parameters.
// drizzle's own statement rendered once, `.prepare()` with `sql.placeholder`, cannot join a
// batch (drizzle-orm#2197), and every operation is one batch.

const dialect = new SQLiteAsyncDialect();
/** Each shape's text and parameters (placeholders among them), and its text as a statement for drizzle's batch to carry. */
const rendered = new Map<string, Query & { raw: SQL }>();

/** One statement rendered once per shape. */
export interface Compiled {
  /** Everything that changes the SQL text: a statement of another shape is rendered anew. */
  shape: string;
  /** The statement on placeholders for every value that changes per call (`placeholder`, `instantAt`). */
  once: () => SQLWrapper;
  /** This call's value of each placeholder. */
  values: Record<string, unknown>;
  /** The same statement built on this call's own values: what `once` with `values` must send (`reportSent`). */
  fresh: () => SQLWrapper;
}

/** Told of a compiled statement as sent: what it was compiled from, and its text and values as D1 gets them. */
export type Report = (compiled: Compiled, sent: Query) => void;

let report: Report | null = null;

/**
 * From now on (null: no more), each compiled statement sent is also told to `to`, for the
 * tests to compare with a fresh render of its call (test/fresh-renders.ts, on in every test
 * file): a shape that leaves out something that changes the SQL, or a value that is no
 * placeholder, sends the first caller's statement to the next.
 */
export function reportSent(to: Report | null): void {
  report = to;
}

function compiled(call: Compiled): Query & { raw: SQL } {
  const { shape, once, values } = call;
  let entry = rendered.get(shape);
  if (!entry) {
    const query = dialect.sqlToQuery(once().getSQL());
    entry = { ...query, raw: sql.raw(query.sql) };
    rendered.set(shape, entry);
  }
  const sent = { sql: entry.sql, params: fillPlaceholders(entry.params, values), raw: entry.raw };
  report?.(call, sent);
  return sent;
}

// drizzle 0.45 batches a raw query with parameters only if it carries the D1 statement to bind
// (`stmt`, @internal), which its builders set and `db.run` / `db.all` do not (drizzle-orm#2277),
// and it takes the values to bind from `getQuery()`, which renders the query's SQL anew: handed
// the text and values already made, a request renders nothing (walking a head of 40 parameters
// chunk by chunk was a third of whoami's CPU, BENCHMARKS.md, Reading).
// Awaited alone, drizzle would run the text without its values: a caller that does is a bug.
function batchable<Q extends object>(db: Database, query: Q, sent: Query, method: "run" | "all"): Q {
  const made = { sql: sent.sql, params: sent.params, method };
  return Object.assign(query, {
    stmt: db.$client.prepare(sent.sql),
    getQuery: () => made,
    execute: () => Promise.reject(new Error("compiled statement outside a batch")),
  });
}

/** A compiled statement that answers nothing (UPDATE, DELETE), for a batch. */
export function compiledRun(db: Database, statement: Compiled) {
  const sent = compiled(statement);
  return batchable(db, db.run(sent.raw), sent, "run");
}

/** A compiled statement that answers rows (RETURNING), each an object by column name, for a batch. */
export function compiledAll(db: Database, statement: Compiled) {
  const sent = compiled(statement);
  return batchable(db, db.all<Record<string, unknown>>(sent.raw), sent, "all");
}

/**
 * A placeholder where a statement's builders take a `T`: they only put it into the SQL, where
 * drizzle renders it as a parameter, filled with the call's value. The one cast of the stand-ins
 * (src/db/authenticated.ts): a drizzle placeholder has no type of the value it stands for.
 */
export function placeholder<T>(name: string): T {
  return sql.placeholder(name) as T;
}

/**
 * A stand-in for an instant: the statements read one only as its epoch milliseconds (a flat
 * template's `getTime()`, cheaper than a column's mapping), here the placeholder `name`.
 */
export function instantAt(name: string): Date {
  const standIn = () => placeholder<number>(name);
  // As JSON too, its placeholder: a shape made of the stand-ins (src/db/authenticated.ts) tells it from null.
  return Object.assign(new Date(Number.NaN), { getTime: standIn, toJSON: standIn });
}
