import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import { retryTransientD1 } from "./binding.ts";

export type Database = DrizzleD1Database;

/** Every path (HTTP, RPC, cron) reads through here, so each retries transient errors once. */
export function openDatabase(d1: D1Database): Database {
  return drizzle(retryTransientD1(d1));
}
