import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { retryTransientD1 } from "./d1.ts";

/** A database, and the D1 binding under it (`$client`: drizzle's own, typed as `drizzle()` gives it). */
export type Database = DrizzleD1Database & { $client: D1Database };

/** Every path (HTTP, RPC, cron) reads through here, so each retries transient errors once. */
export function openDatabase(d1: D1Database): Database {
  return drizzle(retryTransientD1(d1));
}

/** A row of `columns` from the JSON array of their values, each decoded by its column as a row would be. */
export function decoded<T>(columns: Record<string, AnySQLiteColumn>, values: unknown[]): T {
  return Object.fromEntries(
    Object.entries(columns).map(([key, column], i) => [
      key,
      values[i] === null ? null : column.mapFromDriverValue(values[i]),
    ]),
  ) as T;
}

/** A row of `columns` from D1's object of it by column name, each value decoded by its column. */
export function byName<T>(columns: Record<string, AnySQLiteColumn>, row: Record<string, unknown>): T {
  return Object.fromEntries(
    Object.entries(columns).map(([key, column]) => {
      const value = row[column.name];
      return [key, value === null || value === undefined ? null : column.mapFromDriverValue(value)];
    }),
  ) as T;
}

/** A statement D1 can run in a batch. */
type Batched = Parameters<Database["batch"]>[0][number];

/** What a statement of `batchNamed` answers: its rows, or D1's result; undefined when it was left out. */
type ResultOf<S> = S extends Batched ? Awaited<S> : undefined;

/**
 * Runs the statements given (in the record's order; null: left out) as one batch, and answers
 * each one's result under its name: a batch is never read by position, so adding a statement
 * moves no other.
 */
export async function batchNamed<T extends Record<string, Batched | null>>(
  db: Database,
  statements: T,
): Promise<{ [K in keyof T]: ResultOf<T[K]> }> {
  const names = Object.keys(statements).filter((name) => statements[name] !== null);
  const [first, ...rest] = names.map((name) => statements[name] as Batched);
  const results: unknown[] = first ? await db.batch([first, ...rest]) : [];
  return Object.fromEntries(names.map((name, i) => [name, results[i]])) as { [K in keyof T]: ResultOf<T[K]> };
}

/** Runs `statements` as one batch (one round trip, one transaction); none: nothing. */
export async function batchAll(db: Database, statements: Batched[]): Promise<void> {
  const [first, ...rest] = statements;
  if (first) await db.batch([first, ...rest]);
}

/** `items` in parts of at most `size`: D1 binds at most 100 values per statement. */
export function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
