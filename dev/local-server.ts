// The one way a script starts a worker locally: wrangler's own dev server
// (`unstable_startWorker`, what `wrangler dev` runs) on a free loopback port, on the same
// local D1 that `npm start` serves unless told another directory. No port finders or
// process groups: wrangler picks the port (0) and `stop()` disposes of the runtime it started.
import { execFileSync } from "node:child_process";
import { unstable_startWorker } from "wrangler";

export interface LocalServerOptions {
  /** A wrangler config file; the project's own by default. */
  config?: string;
  /** A wrangler environment (`[env.<name>]`). */
  env?: string;
  /** Apply the local D1 migrations first (`npm run db:migrate:local`); on by default. */
  migrate?: boolean;
  /** Keep local state (D1) under this directory, like `wrangler dev --persist-to`. */
  persistTo?: string;
  /** Receives the worker's console output instead of this process's stdout. */
  onLog?: (level: string, message: string) => void;
  /**
   * Local vars and secrets from these files only (`wrangler dev --env-file`), never from a command
   * line; without, wrangler's defaults (`.dev.vars` or `.env` beside the config).
   */
  envFiles?: string[];
}

export interface LocalServer {
  url: URL;
  stop(): Promise<void>;
}

/** `npm run db:migrate:local`, on the given environment and state directory. */
export function migrateLocal(options: Pick<LocalServerOptions, "env" | "persistTo"> = {}): void {
  const extra = [
    ...(options.env ? ["--env", options.env] : []),
    ...(options.persistTo ? ["--persist-to", options.persistTo] : []),
  ];
  const args = ["run", "--silent", "db:migrate:local", ...(extra.length > 0 ? ["--", ...extra] : [])];
  execFileSync("npm", args, { stdio: ["ignore", "ignore", "inherit"] });
}

export async function startLocalServer(options: LocalServerOptions = {}): Promise<LocalServer> {
  const { config = "wrangler.toml", env, migrate = true, persistTo, onLog, envFiles } = options;
  if (migrate) migrateLocal({ env, persistTo });
  const worker = await unstable_startWorker({
    config,
    ...(env ? { env } : {}),
    ...(envFiles ? { envFiles } : {}),
    dev: {
      server: { hostname: "127.0.0.1", port: 0 },
      inspector: false,
      logLevel: "error",
      ...(persistTo ? { persist: persistTo } : {}),
      ...(onLog
        ? { structuredLogsHandler: (log: { level: string; message: string }) => onLog(log.level, log.message) }
        : {}),
    },
  });
  await worker.ready;
  return { url: await worker.url, stop: () => worker.dispose() };
}
