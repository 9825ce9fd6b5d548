// `npm start` as a user runs it, for the checks that drive it from outside (the README's tour in
// test/checks/check-docs.ts, the operator check): its own loopback port and state directory, in a
// process group of its own so that stopping it stops wrangler and workerd too.
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";

const ROOT = path.join(import.meta.dirname, "..");

/** A TCP port nothing listens on now, for a server started next. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface NpmStart {
  child: ChildProcess;
  /** What it printed so far, stdout and stderr. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * `npm start -- <args> --port <port> --ip 127.0.0.1 --persist-to <state>`, once it answers
 * (`GET /auth/nowhere` → 404; within two minutes, else it throws with what it printed), with
 * `env` over this process's environment (e.g. ADMIN_KEYS_FILE).
 */
export async function startNpmStart(
  port: number,
  state: string,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<NpmStart> {
  const argv = ["start", "--", ...args, "--port", String(port), "--ip", "127.0.0.1", "--persist-to", state];
  const child = spawn("npm", argv, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
    env: { ...process.env, ...env },
  });
  let log = "";
  for (const stream of [child.stdout, child.stderr]) stream.on("data", (chunk) => (log += chunk));
  const closed = new Promise((resolve) => child.once("close", resolve));
  const server: NpmStart = {
    child,
    log: () => log,
    stop: async () => {
      process.kill(-(child.pid as number), "SIGTERM");
      await closed;
    },
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/auth/nowhere`)).status === 404) return server;
    } catch {}
    if (child.exitCode !== null || Date.now() > deadline) {
      await server.stop();
      throw new Error(`npm start did not come up:\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
