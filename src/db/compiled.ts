import { fillPlaceholders, SQL, type SQLChunk, type SQLWrapper, StringChunk, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { Database } from "./client.ts";

// Rendering a statement to SQL text is most of the CPU a request spends in drizzle (BENCHMARKS.md,
// Reading). The statements every request by token runs (src/db/authenticated.ts) are rendered once
// per isolate and shape, with a placeholder for each value, and each call only splices its
// values into that text: the SQL D1 gets is the same, its values bound as parameters.
// drizzle's own statement rendered once, `.prepare()` with `sql.placeholder`, cannot join a
// batch (drizzle-orm#2197), and every operation is one batch.

const dialect = new SQLiteAsyncDialect();
const rendered = new Map<string, { text: string; parts: StringChunk[]; params: unknown[] }>();

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

/** Told of a compiled statement as sent: what it was compiled from, its text, the SQL its values are bound from. */
export type Report = (compiled: Compiled, text: string, statement: SQL) => void;

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

function compiled(call: Compiled) {
  const { shape, once, values } = call;
  let entry = rendered.get(shape);
  if (!entry) {
    const query = dialect.sqlToQuery(once().getSQL());
    // The text between parameters, to splice each call's values into: drizzle's batch takes a
    // raw statement's values only by rendering it (below). Only their order counts: D1 is sent
    // `text` (a `?` in a literal only shifts the parts and leaves the last out).
    const parts = query.sql.split("?").map((part) => new StringChunk(part));
    entry = { text: query.sql, parts, params: query.params };
    rendered.set(shape, entry);
  }
  // The statement as drizzle's own chunks: the text's parts, each of this call's values a parameter.
  const { parts } = entry;
  const bound = fillPlaceholders(entry.params, values);
  const statement = new SQL([parts[0], ...bound.flatMap((value, i): SQLChunk[] => [sql.param(value), parts[i + 1]])]);
  report?.(call, entry.text, statement);
  return { statement, text: entry.text };
}

// drizzle 0.45 batches a raw query with parameters only if it carries the D1 statement to bind
// (`stmt`, @internal), which its builders set and `db.run` / `db.all` do not (drizzle-orm#2277).
function batchable<Q extends object>(db: Database, query: Q, text: string): Q {
  return Object.assign(query, { stmt: db.$client.prepare(text) });
}

/** A compiled statement that answers nothing (UPDATE, DELETE), for a batch. */
export function compiledRun(db: Database, statement: Compiled) {
  const { statement: query, text } = compiled(statement);
  return batchable(db, db.run(query), text);
}

/** A compiled statement that answers rows (RETURNING), each an object by column name, for a batch. */
export function compiledAll(db: Database, statement: Compiled) {
  const { statement: query, text } = compiled(statement);
  return batchable(db, db.all<Record<string, unknown>>(query), text);
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
