// The migrations of every database of a wrangler environment (those `SHARDS` names), by
// wrangler's own D1 commands: applied before `npm start` and the demo serve, and by the
// operator commands `db:migrate:*` and `db:status` (scripts/shards.ts).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { unstable_readConfig } from "wrangler";
import { shardBindingsOf } from "../src/services/moves.ts";

const PROJECT = fileURLToPath(new URL("..", import.meta.url));

/** The D1 bindings `SHARDS` names in `env` (undefined: the top level), each declared there. */
export function shardBindings(env: string | undefined): string[] {
  const config = unstable_readConfig({ config: `${PROJECT}wrangler.toml`, env }, { hideWarnings: true });
  const file = env === undefined ? "wrangler.toml" : `[env.${env}] of wrangler.toml`;
  const declared = new Set(config.d1_databases.map((database: { binding: string }) => database.binding));
  const bindings = shardBindingsOf(String(config.vars.SHARDS ?? ""));
  for (const binding of bindings) {
    if (!declared.has(binding))
      throw new Error(`SHARDS names ${binding}, which is not a d1_databases binding in ${file}`);
  }
  return [...bindings];
}

/** A wrangler command run in the project, its output kept (or, interactive, shown as it runs). */
export function wrangler(args: string[], interactive: boolean): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("npx", ["wrangler", ...args], {
      cwd: PROJECT,
      stdio: interactive ? "inherit" : ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (chunk) => (output += chunk));
    child.stderr?.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, output }));
  });
}

/** Where a wrangler D1 command acts: `--local` or `--remote`, in `env`. */
export const where = (env: string | undefined, location: "local" | "remote") =>
  [`--${location}`, ...(env === undefined ? [] : ["--env", env])] as const;

/**
 * Applies migrations/ to every database of `env` with wrangler's own commands, one after
 * another: local ones quietly (progress on stderr), under `persistTo` when given; remote ones
 * so wrangler can ask before each. Locally, only on files no server holds: `npm start` and
 * the demo run it before theirs starts.
 */
export async function applyMigrations(
  env: string | undefined,
  location: "local" | "remote",
  persistTo?: string,
): Promise<void> {
  const bindings = shardBindings(env);
  const persist = persistTo === undefined ? [] : ["--persist-to", persistTo];
  const apply = (binding: string) =>
    wrangler(["d1", "migrations", "apply", binding, ...where(env, location), ...persist], location === "remote");
  if (location === "remote") {
    for (const binding of bindings) {
      if ((await apply(binding)).code !== 0) throw new Error(`migrating ${binding} (remote) failed`);
    }
    return;
  }
  // One after another: each is a workerd of its own on the same state directory, and two
  // starting at once can meet SQLITE_BUSY there.
  for (const binding of bindings) {
    const { code, output } = await apply(binding);
    if (code !== 0) {
      process.stderr.write(output);
      throw new Error(`migrating ${binding} (local) failed`);
    }
  }
  process.stderr.write(`migrations applied to ${bindings.join(", ")} (local${env ? `, env ${env}` : ""})\n`);
}
