import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { retryTransientD1 } from "./d1.ts";

/** A database, and the D1 binding under it (`$client`: drizzle's own, typed as `drizzle()` gives it). */
export type Database = DrizzleD1Database & { $client: D1Database };

/** Every path (HTTP, RPC, cron) reads through here, so each retries transient errors once. */
export function openDatabase(d1: D1Database): Database {
  return drizzle(retryTransientD1(d1));
}

/**
 * Decodes a row of `columns` from the JSON array of their values, each value by its column as a
 * row would be. Built once per set of columns: a list decodes every session with it, and
 * walking the columns' entries anew for each row was most of a long list's CPU (BENCHMARKS.md, Reading).
 */
export function decoderOf<T>(columns: Record<string, AnySQLiteColumn>): (values: unknown[]) => T {
  const keys = Object.keys(columns);
  const decoders = Object.values(columns);
  return (values) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) {
      const value = values[i];
      row[keys[i] as string] = value === null ? null : (decoders[i] as AnySQLiteColumn).mapFromDriverValue(value);
    }
    return row as T;
  };
}

/** Decodes a row of `columns` from D1's object of it by column name, each value by its column. */
export function byNameDecoderOf<T>(columns: Record<string, AnySQLiteColumn>): (row: Record<string, unknown>) => T {
  const entries = Object.entries(columns).map(([key, column]) => [key, column.name, column] as const);
  return (values) => {
    const row: Record<string, unknown> = {};
    for (const [key, name, column] of entries) {
      const value = values[name];
      row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
    }
    return row as T;
  };
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
