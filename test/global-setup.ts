import { execFileSync } from "node:child_process";
import path from "node:path";

// Runs in Node before the suite: builds the example login worker with wrangler, from its own
// wrangler.toml, for the auxiliary worker that test/login-worker.test.ts calls.
export const LOGIN_WORKER_BUILD = path.join(import.meta.dirname, "..", "node_modules", ".cache", "login-worker");

export default function setup(): void {
  const wrangler = path.join(import.meta.dirname, "..", "node_modules", "wrangler", "bin", "wrangler.js");
  execFileSync(
    process.execPath,
    [
      wrangler,
      "deploy",
      "--dry-run",
      "--config",
      "examples/login-worker/wrangler.toml",
      "--outdir",
      LOGIN_WORKER_BUILD,
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
}
