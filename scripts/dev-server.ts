// Where a running `npm start` says it serves: written by scripts/dev.ts, read by the operator
// commands (scripts/local-d1.ts) to go through its gateway instead of the files it holds.
// No node:sqlite here, so `npm start` itself loads none.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

export interface DevServer {
  /** The wrangler environment it serves; null for the top level. */
  env: string | null;
  url: string;
  /** The operator gateway's bearer token (scripts/dev-worker.ts). */
  token: string;
  /** Over https: the certificate it serves (PEM), trusted for this server alone. */
  ca?: string;
  pid: number;
}

export const DEV_SERVER_FILE = path.join(import.meta.dirname, "..", ".wrangler", "dev-server.json");

/** The running `npm start` of this environment, or null when none is (a stale file is ignored). */
export function devServerOf(env: string | undefined): DevServer | null {
  if (!existsSync(DEV_SERVER_FILE)) return null;
  const server = JSON.parse(readFileSync(DEV_SERVER_FILE, "utf8")) as DevServer;
  if (server.env !== (env ?? null)) return null;
  try {
    process.kill(server.pid, 0);
  } catch {
    return null;
  }
  return server;
}
