import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";
import { LOGIN_WORKER_BUILD } from "./test/global-setup.ts";

// Auxiliary workers cannot read a wrangler.toml, so they are described here. The pool names
// the worker under test `vitest-plugin-runner-<project name, [^a-z0-9-] as _>`, one per
// project: the login worker's binding must name its own project's.
const sessionService = (project: string) => ({
  name: `vitest-plugin-runner-${project.replace(/[^a-z0-9-]/gi, "_")}`,
  entrypoint: "SessionService",
});
const compatibilityDate = "2026-10-30";

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
              serviceBindings: { SESSIONS: sessionService(name), SESSION_API: { name: sessionService(name).name } },
            },
          ],
        },
      }),
    ],
    test: {
      name,
      // test/browser/ is Playwright's (npm run test:browser); test/checks/ are node scripts run
      // by npm (walkthrough, check:operator, docs:check…), never by Vitest, whatever their name.
      include: ["test/**/*.test.ts"],
      exclude: [...configDefaults.exclude, "test/checks/**"],
      setupFiles: ["./test/setup.ts"],
      // The worker logs a JSON line per request; show logs only for failing tests.
      silent: "passed-only" as const,
    },
  });
  return {
    test: {
      // Once for both projects (the root's own global setup), not once per project.
      globalSetup: ["./test/global-setup.ts"],
      projects: [project("1 database"), project("4 databases", "sharded")],
    },
  };
});
