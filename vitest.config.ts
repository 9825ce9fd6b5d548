import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => {
  // The same migrations wrangler applies, applied to each test run's D1 by test/setup.ts.
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.toml" },
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
      // test/browser/ is Playwright's (npm run test:browser).
      include: ["test/**/*.test.ts"],
      setupFiles: ["./test/setup.ts"],
      // The worker logs a JSON line per request; show logs only for failing tests.
      silent: "passed-only" as const,
    },
  };
});
