// The one way a script starts a worker locally: wrangler's own dev server
// (`unstable_startWorker`, what `wrangler dev` runs) on a free loopback port, on the same
// local D1 that `npm start` serves. No port finders or process groups: wrangler picks the
// port (0) and `stop()` disposes of the runtime it started.
import { execFileSync } from "node:child_process";
import { unstable_startWorker } from "wrangler";

export interface LocalServerOptions {
  /** A wrangler config file; the project's own by default. */
  config?: string;
  /** A wrangler environment (`[env.<name>]`). */
  env?: string;
  /** Apply the local D1 migrations first (`npm run db:migrate:local`); on by default. */
  migrate?: boolean;
}

export interface LocalServer {
  url: URL;
  stop(): Promise<void>;
}

export async function startLocalServer(options: LocalServerOptions = {}): Promise<LocalServer> {
  const { config = "wrangler.toml", env, migrate = true } = options;
  if (migrate) {
    const args = ["run", "--silent", "db:migrate:local", ...(env ? ["--", "--env", env] : [])];
    execFileSync("npm", args, { stdio: ["ignore", "ignore", "inherit"] });
  }
  const worker = await unstable_startWorker({
    config,
    ...(env ? { env } : {}),
    dev: { server: { hostname: "127.0.0.1", port: 0 }, inspector: false, logLevel: "error" },
  });
  await worker.ready;
  return { url: await worker.url, stop: () => worker.dispose() };
}
