import { defineConfig } from "@playwright/test";

// `npm run test:browser`: the real-browser CSRF test (test/browser/) against `npm start`,
// in Debian's Chromium (CHROMIUM_PATH overrides; Playwright never downloads a browser here).
// The port is fixed because webServer waits on it: npm start's 8787 + 1, so the test can run
// beside a dev server (BROWSER_TEST_PORT overrides).
const port = Number(process.env.BROWSER_TEST_PORT ?? 8788);

export default defineConfig({
  testDir: "test/browser",
  // The scenarios share one server and its rate limiter: one at a time, in order.
  workers: 1,
  timeout: 60_000,
  forbidOnly: true,
  reporter: "list",
  use: {
    browserName: "chromium",
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      // Without these Chromium keeps calling home, which a closed network turns into a flood.
      args: ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic"],
    },
  },
  webServer: {
    command: `npm start -- --ip 127.0.0.1 --port ${port}`,
    url: `http://127.0.0.1:${port}/openapi.json`,
    timeout: 60_000,
    reuseExistingServer: false,
  },
  metadata: { api: `http://localhost:${port}`, apiDirect: `http://127.0.0.1:${port}` },
});
