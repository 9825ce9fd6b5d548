import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { readShardMap } from "../src/db/shards.ts";

// Runs before each test file, on every database of the deployment under test;
// already-applied migrations are skipped.
for (const binding of readShardMap(env).bindings) {
  await applyD1Migrations((env as unknown as Record<string, D1Database>)[binding] as D1Database, env.TEST_MIGRATIONS);
}
