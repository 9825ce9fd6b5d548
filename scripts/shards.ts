// The databases of a wrangler environment, as the worker sees them (the `SHARDS` var,
// checked by src/db/shards.ts against the environment's D1 bindings), and the migrations
// of every one of them. Usage:
//   node scripts/shards.ts migrate --local|--remote [--env <env>]   (npm run db:migrate:local / :remote)
//                                  [--persist-to <dir>]            (local state elsewhere, as wrangler dev's)
//   node scripts/shards.ts status [--remote] [--env <env>]          (npm run db:status)
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { unstable_readConfig } from "wrangler";
import { parseShardMap } from "../src/db/shards.ts";

const PROJECT = fileURLToPath(new URL("..", import.meta.url));

/** The D1 bindings `SHARDS` names in `env` (undefined: the top level), each declared there. */
export function shardBindings(env: string | undefined): string[] {
  const config = unstable_readConfig({ config: `${PROJECT}wrangler.toml`, env }, { hideWarnings: true });
  const where = env === undefined ? "wrangler.toml" : `[env.${env}] of wrangler.toml`;
  const declared = new Set(config.d1_databases.map((database: { binding: string }) => database.binding));
  const { bindings } = parseShardMap(String(config.vars.SHARDS ?? ""));
  for (const binding of bindings) {
    if (!declared.has(binding))
      throw new Error(`SHARDS names ${binding}, which is not a d1_databases binding in ${where}`);
  }
  return [...bindings];
}

/** `--env <name>` / `--env=<name>` / `-e <name>` among wrangler-style arguments. */
export function envOf(args: string[]): string | undefined {
  for (const [index, arg] of args.entries()) {
    if (arg === "--env" || arg === "-e") return args[index + 1];
    if (arg.startsWith("--env=")) return arg.slice("--env=".length);
  }
  return undefined;
}

function wrangler(args: string[], interactive: boolean): Promise<{ code: number; output: string }> {
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

const where = (env: string | undefined, location: "local" | "remote") =>
  [`--${location}`, ...(env === undefined ? [] : ["--env", env])] as const;

/**
 * Applies migrations/ to every database of `env`. Local databases in parallel and quietly
 * (progress on stderr), under `persistTo` when given; remote ones one after another, so
 * wrangler can ask before each.
 */
export async function migrate(
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
  const results = await Promise.all(bindings.map(apply));
  for (const [index, { code, output }] of results.entries()) {
    if (code !== 0) {
      process.stderr.write(output);
      throw new Error(`migrating ${bindings[index]} (local) failed`);
    }
  }
  process.stderr.write(`migrations applied to ${bindings.join(", ")} (local${env ? `, env ${env}` : ""})\n`);
}

/** One line per database: up to date, or which migrations it still lacks. False when any lacks one. */
export async function status(env: string | undefined, location: "local" | "remote"): Promise<boolean> {
  const bindings = shardBindings(env);
  const results = await Promise.all(
    bindings.map((binding) => wrangler(["d1", "migrations", "list", binding, ...where(env, location)], false)),
  );
  let current = true;
  for (const [index, { code, output }] of results.entries()) {
    const binding = bindings[index] as string;
    if (code !== 0) {
      current = false;
      console.log(`${binding}: could not be read\n${output}`);
    } else if (output.includes("No migrations to apply")) {
      console.log(`${binding}: up to date`);
    } else {
      current = false;
      const pending = [...output.matchAll(/\b(\d{4}_[\w-]+\.sql)\b/g)].map((match) => match[1]);
      console.log(
        `${binding}: behind, missing ${[...new Set(pending)].join(", ") || "(see wrangler d1 migrations list)"}`,
      );
    }
  }
  return current;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      env: { type: "string", short: "e" },
      local: { type: "boolean" },
      remote: { type: "boolean" },
      "persist-to": { type: "string" },
    },
  });
  const location = values.remote ? "remote" : "local";
  try {
    if (positionals[0] === "migrate" && (values.local || values.remote)) {
      await migrate(values.env, location, values["persist-to"]);
    } else if (positionals[0] === "status") {
      if (!(await status(values.env, location))) process.exitCode = 1;
    } else {
      console.error(
        "usage: node scripts/shards.ts migrate --local|--remote [--env <env>] [--persist-to <dir>] | status [--remote] [--env <env>]",
      );
      process.exitCode = 2;
    }
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  }
}
