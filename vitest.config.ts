import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => {
  // The same migrations wrangler applies, applied to each test run's D1 databases by test/setup.ts.
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  // The whole suite runs twice: on the default one-database deployment, and on
  // wrangler.toml's `sharded` environment (four databases), through the same code.
  const project = (name: string, environment?: string) => ({
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.toml", ...(environment === undefined ? {} : { environment }) },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            // Generated cases per property/model test; raise it for a longer hunt.
            FAST_CHECK_RUNS: process.env.FAST_CHECK_RUNS ?? "200",
          },
        },
      }),
    ],
    test: {
      name,
      setupFiles: ["./test/setup.ts"],
      // The worker logs a JSON line per request; show logs only for failing tests.
      silent: "passed-only" as const,
    },
  });
  return { test: { projects: [project("1 database"), project("4 databases", "sharded")] } };
});
