declare namespace Cloudflare {
  interface Env {
    TEST_MIGRATIONS: import("cloudflare:test").D1Migration[];
    FAST_CHECK_RUNS: string;
    TEST_EVENTS_QUEUE: Queue<import("../src/services/event-message.ts").SessionEventMessage>;
    /** test/workers/events-consumer.js: GET lists what the queue delivered. */
    EVENTS_CONSUMER: Fetcher;
    /** examples/login-worker, bound to this worker's SessionService. */
    LOGIN_WORKER: Fetcher;
  }
}

/** A file's text, as Vite imports it (test/docs-check.test.ts reads ARCHITECTURE.md and src/http/app.ts so). */
declare module "*.md?raw" {
  const text: string;
  export default text;
}
declare module "*.ts?raw" {
  const text: string;
  export default text;
}
