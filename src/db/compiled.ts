import { fillPlaceholders, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core/dialect";
import type { Database } from "./client.ts";

// Rendering a statement to SQL text is most of the CPU a request spends in drizzle (BENCHMARKS.md,
// Cost). The statements every request by token runs (src/db/authenticated.ts) are rendered once
// per isolate and shape, with a placeholder for each value, and each call only splices its
// values into that text: the SQL D1 gets is the same, its values bound as parameters.

const dialect = new SQLiteAsyncDialect();
const rendered = new Map<string, { text: string; parts: TemplateStringsArray; params: unknown[] }>();

/**
 * The statement `build` gives for `shape`, with `values` for its placeholders. `build` runs
 * once per shape: everything that changes its SQL text must be in `shape`, every value that
 * changes per call a placeholder (`sql.placeholder(name)`, `instantAt(name)`).
 */
function compiled(shape: string, build: () => SQLWrapper, values: Record<string, unknown>) {
  let entry = rendered.get(shape);
  if (!entry) {
    const query = dialect.sqlToQuery(build().getSQL());
    // The text between parameters: SQLite's `?`, which no literal of these statements holds.
    const parts = query.sql.split("?");
    entry = { text: query.sql, parts: Object.assign(parts, { raw: parts }), params: query.params };
    rendered.set(shape, entry);
  }
  const statement: SQL = sql(entry.parts, ...fillPlaceholders(entry.params, values));
  return { statement, text: entry.text };
}

// drizzle 0.45 batches a raw query with parameters only if it carries the D1 statement to bind
// (`stmt`), which its builders set and `db.run` / `db.all` do not.
function batchable<Q extends object>(db: Database, query: Q, text: string): Q {
  const client = (db as unknown as { $client: D1Database }).$client;
  return Object.assign(query, { stmt: client.prepare(text) });
}

/** A compiled statement that answers nothing (UPDATE, DELETE), for a batch. */
export function compiledRun(db: Database, shape: string, build: () => SQLWrapper, values: Record<string, unknown>) {
  const { statement, text } = compiled(shape, build, values);
  return batchable(db, db.run(statement), text);
}

/** A compiled statement that answers rows (RETURNING), each an object by column name, for a batch. */
export function compiledAll(db: Database, shape: string, build: () => SQLWrapper, values: Record<string, unknown>) {
  const { statement, text } = compiled(shape, build, values);
  return batchable(db, db.all<Record<string, unknown>>(statement), text);
}

/** A stand-in for an instant while `build` runs: its epoch milliseconds are the placeholder `name`. */
export function instantAt(name: string): Date {
  return { getTime: () => sql.placeholder(name) } as unknown as Date;
}
