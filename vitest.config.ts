import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { LOGIN_WORKER_BUILD } from "./test/global-setup.ts";

// Auxiliary workers cannot read a wrangler.toml, so they are described here. The pool names
// the worker under test (this project's) `vitest-plugin-runner-`.
const SESSION_SERVICE = { name: "vitest-plugin-runner-", entrypoint: "SessionService" };
const compatibilityDate = "2026-10-30";

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
          // A real queue for test/outbox.test.ts, under another name than SESSION_EVENTS so
          // that every other test runs as deployed without one.
          queueProducers: { TEST_EVENTS_QUEUE: { queueName: "session-events" } },
          serviceBindings: { EVENTS_CONSUMER: "events-consumer", LOGIN_WORKER: "login-worker" },
          workers: [
            {
              name: "events-consumer",
              modules: true,
              scriptPath: "./test/workers/events-consumer.js",
              compatibilityDate,
              queueConsumers: { "session-events": { maxBatchTimeout: 0.05 } },
            },
            {
              // examples/login-worker, built by test/global-setup.ts, bound as its wrangler.toml says.
              name: "login-worker",
              modules: true,
              scriptPath: path.join(LOGIN_WORKER_BUILD, "index.js"),
              compatibilityDate,
              serviceBindings: { SESSIONS: SESSION_SERVICE },
            },
          ],
        },
      }),
    ],
    test: {
      // test/browser/ is Playwright's (npm run test:browser).
      include: ["test/**/*.test.ts"],
      globalSetup: ["./test/global-setup.ts"],
      setupFiles: ["./test/setup.ts"],
      // The worker logs a JSON line per request; show logs only for failing tests.
      silent: "passed-only" as const,
    },
  };
});
