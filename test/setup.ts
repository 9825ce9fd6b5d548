import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, expect } from "vitest";
import { readShardMap } from "../src/db/shards.ts";
import { limitBoundParameters, type Overbound } from "./d1.ts";
import { compareEveryStatement, difference, stale } from "./fresh-renders.ts";

// Runs before each test file, on every database of the deployment under test;
// already-applied migrations are skipped.
for (const binding of readShardMap(env).bindings) {
  await applyD1Migrations((env as unknown as Record<string, D1Database>)[binding] as D1Database, env.TEST_MIGRATIONS);
}

// Each compiled statement, in every test, is the statement a fresh render of its call gives.
compareEveryStatement();
afterAll(() => expect(stale.map(difference)).toEqual([]));

// D1 refuses a statement binding more than 100 values: every statement the suite sends is held
// to that limit by name, and a file that sent one more fails even if its refusal was swallowed.
const overbound: Overbound[] = [];
limitBoundParameters(env.DB, overbound);
afterAll(() => expect(overbound).toEqual([]));
