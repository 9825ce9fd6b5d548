import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import { retryTransientD1 } from "./d1.ts";

export type Database = DrizzleD1Database;

/** Every path (HTTP, RPC, cron) reads through here, so each retries transient errors once. */
export function openDatabase(d1: D1Database): Database {
  return drizzle(retryTransientD1(d1));
}

/** A statement D1 can run in a batch. */
type Batched = Parameters<Database["batch"]>[0][number];

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
