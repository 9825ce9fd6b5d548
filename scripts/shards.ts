// The databases of a wrangler environment, as the worker sees them (the `SHARDS` var,
// checked by src/db/shards.ts against the environment's D1 bindings), and the migrations
// of every one of them. Usage:
//   node scripts/shards.ts migrate --local|--remote [--env <env>]   (npm run db:migrate:local / :remote)
//                                  [--persist-to <dir>]            (local state elsewhere, as wrangler dev's)
//   node scripts/shards.ts status [--remote] [--env <env>]          (npm run db:status)
//   node scripts/shards.ts move --buckets <first>-<last> --to <binding> [--region <region>]
//                          [--env <env>] [--remote]                 (npm run shards:move)
//   node scripts/shards.ts move --finish [--env <env>] [--remote]
// Locally, each works through the running `npm start` (or demo) serving the environment, or the
// one `--server <port|URL>` names, and says which on stderr ("server: …"), or that none serves
// it (the local files then).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { getPlatformProxy, unstable_readConfig } from "wrangler";
import { onTheFiles, SAID_ENV, type ServerAsked, serversFor, toStderr } from "../dev/dev-server.ts";
import { applyMigrations, shardBindings, where, wrangler } from "../dev/migrations.ts";
import {
  finishMoving,
  type MoveAsked,
  type MoveDatabases,
  type MovePart,
  type MoveReport,
  moveBucketRange,
} from "../src/services/moves.ts";
import { parseOptions, refuse, refuseServerWith, SERVER_USAGE, serverOption } from "./options.ts";

const PROJECT = fileURLToPath(new URL("..", import.meta.url));

/**
 * The gateway of the server `asked` names, or of the `npm start` (or `npm run demo`) serving
 * `env`, if one runs: wrangler's own D1 commands would be a second workerd on the files it
 * holds. Either way said on stderr (the files, unless the command that runs this one said so).
 * dev/local-d1.ts is loaded only when a server is to be reached: it loads node:sqlite, which
 * warns as it loads, and `db:migrate:remote` (run by `predeploy`) does not silence it.
 */
async function runningServer(env: string | undefined, asked: ServerAsked | undefined) {
  const say = process.env[SAID_ENV] ? () => {} : toStderr;
  if (asked === undefined && (await serversFor(env)).length === 0) {
    say(onTheFiles(env));
    return null;
  }
  const { throughRunningServer } = await import("../dev/local-d1.ts");
  return throughRunningServer(env, asked, say);
}

/**
 * `db:migrate:local` / `db:migrate:remote`: applies migrations/ to every database of `env`.
 * While `npm start` or `npm run demo` serves `env` locally (or `asked` names one), through its server.
 */
export async function migrate(
  env: string | undefined,
  location: "local" | "remote",
  persistTo?: string,
  asked?: ServerAsked,
): Promise<void> {
  const server = location === "local" && persistTo === undefined ? await runningServer(env, asked) : null;
  if (!server) return applyMigrations(env, location, persistTo);
  const applied = await server.migrate();
  process.stderr.write(
    `${applied.length === 0 ? "no migrations to apply" : `applied ${applied.join(", ")}`} (through ${server.server.name}'s server${server.env ? `, env ${server.env}` : ""})\n`,
  );
}

/** One line per database: up to date, or which migrations it still lacks. False when any lacks one. */
export async function status(
  env: string | undefined,
  location: "local" | "remote",
  asked?: ServerAsked,
): Promise<boolean> {
  const server = location === "local" ? await runningServer(env, asked) : null;
  if (server) {
    const pending = await server.pending();
    for (const binding of shardBindings(server.env)) {
      const missing = pending.get(binding) ?? [];
      console.log(`${binding}: ${missing.length === 0 ? "up to date" : `behind, missing ${missing.join(", ")}`}`);
    }
    return [...pending.values()].every((missing) => missing.length === 0);
  }
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

/** Buckets moved a call, and a progress line after each; through npm start's gateway, each call is one request. */
const BUCKETS_PER_CALL = 64;

interface Mover {
  move(asked: MoveAsked, part: MovePart): Promise<MoveReport>;
  finish(): Promise<{ dropped: number }>;
  close(): Promise<void>;
}

const moverOn = (databases: MoveDatabases, close: () => Promise<void>): Mover => ({
  move: (asked, part) => moveBucketRange(databases, asked, part),
  finish: () => finishMoving(databases),
  close,
});

/**
 * Moves on every D1 database of `env`, SHARDS-named or not: inside the running `npm start`
 * serving it, or the one `server` names (its gateway runs the steps on its own D1), else on the
 * local files, or (remote) on the real ones. Its `env`: the one moved in (a named server's).
 */
async function openMover(
  env: string | undefined,
  location: "local" | "remote",
  server?: ServerAsked,
): Promise<Mover & { env: string | undefined }> {
  if (location === "local") {
    // Imported here, as in runningServer: node:sqlite warns as it loads.
    const { openLocalProject, operatorCall } = await import("../dev/local-d1.ts");
    const project = await openLocalProject(env, server);
    const close = async () => project.close();
    const { server: through, wranglerEnv } = project;
    // The server moves with the SHARDS it runs with, which `--var SHARDS:…` may have changed;
    // without one, the vars are those it would run with.
    if (through)
      return {
        env: wranglerEnv,
        move: (asked, part) => operatorCall(through, "/__operator/shards/move", { ...asked, ...part }),
        finish: () => operatorCall(through, "/__operator/shards/finish"),
        close,
      };
    const config = unstable_readConfig({ config: `${PROJECT}wrangler.toml`, env }, { hideWarnings: true });
    return {
      env,
      ...moverOn(
        {
          shards: project.env.SHARDS,
          bindings: config.d1_databases.map((database: { binding: string }) => database.binding),
          d1: (binding) => project.env[binding] as D1Database,
        },
        close,
      ),
    };
  }
  const deployed = await openDeployedDatabases(env);
  const databases = {
    shards: String(deployed.env.SHARDS ?? ""),
    bindings: deployed.bindings,
    d1: (binding: string) => deployed.env[binding] as D1Database,
  };
  return { env, ...moverOn(databases, deployed.close) };
}

/**
 * The deployed D1 databases of `env` (every binding of wrangler.toml), through wrangler's remote
 * bindings: the same D1 API (batches included) over Cloudflare's, after `npx wrangler login`.
 * Its `env`: wrangler.toml's vars for `env` (the deployed `SHARDS`) and the databases by binding,
 * as the worker sees them. For `shards:move --remote` and `org -- sync-policies --remote`.
 */
export async function openDeployedDatabases(env: string | undefined) {
  const config = unstable_readConfig({ config: `${PROJECT}wrangler.toml`, env }, { hideWarnings: true });
  const dir = mkdtempSync(path.join(tmpdir(), "deployed-d1-"));
  const remote = {
    name: config.name,
    compatibility_date: config.compatibility_date,
    d1_databases: config.d1_databases.map((database: object) => ({ ...database, remote: true })),
  };
  writeFileSync(path.join(dir, "wrangler.json"), JSON.stringify(remote));
  const proxy = await getPlatformProxy({ configPath: path.join(dir, "wrangler.json"), remoteBindings: true }).catch(
    (error) => {
      rmSync(dir, { recursive: true, force: true });
      throw error;
    },
  );
  return {
    env: { ...config.vars, ...proxy.env } as Record<string, unknown>,
    bindings: config.d1_databases.map((database: { binding: string }) => database.binding),
    close: async () => {
      await proxy.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const USAGE = `usage: node scripts/shards.ts migrate --local|--remote [--env <env>] [--persist-to <dir> | --server <port|URL>]
       node scripts/shards.ts status [--remote] [--env <env>] [--server <port|URL>]
       npm run shards:move -- --buckets <first>-<last> --to <binding> [--region <region>] [--env <env>] [--remote | --server <port|URL>]
       npm run shards:move -- --finish [--env <env>] [--remote | --server <port|URL>]
${SERVER_USAGE}`;

/** What `shards:move` is asked to move, or null for `--finish`; bad arguments are refused. */
function moveAsked(values: Record<string, string | boolean | undefined>) {
  if (values.finish) {
    if ([values.buckets, values.to, values.region].some((value) => value !== undefined))
      refuse("--finish takes no --buckets, --to or --region", USAGE);
    return null;
  }
  const range = /^(\d+)(?:-(\d+))?$/.exec(String(values.buckets ?? ""));
  if (!range || typeof values.to !== "string") refuse("give --buckets <first>-<last> and --to <binding>", USAGE);
  const first = Number(range[1]);
  return {
    first,
    last: Number(range[2] ?? first),
    to: values.to,
    region: (values.region as string | undefined) ?? "default",
  };
}

/** `shards:move`: moves the buckets, a few a call, then says what is left to do. */
async function move(
  values: Record<string, string | boolean | undefined>,
  location: "local" | "remote",
  server: ServerAsked | undefined,
) {
  // Before any database is opened (which may apply migrations): bad arguments change nothing.
  const asked = moveAsked(values);
  const mover = await openMover(values.env as string | undefined, location, server);
  const { env } = mover;
  const where = `${env === undefined ? "" : ` --env ${env}`}${location === "remote" ? " --remote" : ""}`;
  const named = server === undefined ? "" : ` --server ${server.given}`;
  try {
    if (asked === null) {
      const { dropped } = await mover.finish();
      console.log(`dropped ${dropped} moved-bucket rows: requests go to the databases SHARDS names, in one round trip`);
      return;
    }
    const { first, last, to } = asked;
    const report = { moved: 0, alreadyThere: 0, sessions: 0, events: 0, shards: "" };
    const started = performance.now();
    // One call at least: a range that is no range is refused by it.
    for (let from = first; from === first || from <= last; from += BUCKETS_PER_CALL) {
      const part = await mover.move(asked, { from, count: BUCKETS_PER_CALL });
      report.moved += part.moved;
      report.alreadyThere += part.alreadyThere;
      report.sessions += part.sessions;
      report.events += part.events;
      report.shards = part.shards;
      process.stderr.write(`buckets ${first}-${Math.min(last, from + BUCKETS_PER_CALL - 1)} done\n`);
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `moved ${report.moved} buckets (${report.sessions} sessions, ${report.events} events) to ${to} in ${seconds.toFixed(1)} s (${(report.moved / seconds).toFixed(1)} buckets/s); ${report.alreadyThere} were there already.`,
    );
    console.log("Left to do:");
    console.log(
      `  1. Set SHARDS in wrangler.toml${env === undefined ? " [vars]" : ` [env.${env}.vars]`} and deploy (npm run deploy${env === undefined ? "" : ` -- --env ${env}`}):`,
    );
    console.log(`     SHARDS = '${report.shards}'`);
    if (location === "local")
      console.log(
        `     (locally, without editing wrangler.toml: npm start --${where} --var SHARDS:'${report.shards}')`,
      );
    console.log(
      "     Until then every request for these buckets reaches the old database first and follows the move: one more round trip.",
    );
    console.log(
      `  2. Once no version of the worker with the old SHARDS serves any more (npx wrangler deployments status): npm run shards:move -- --finish${where}${named}`,
    );
  } finally {
    await mover.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseOptions(
    process.argv.slice(2),
    {
      env: { type: "string", short: "e" },
      local: { type: "boolean" },
      remote: { type: "boolean" },
      "persist-to": { type: "string" },
      buckets: { type: "string" },
      to: { type: "string" },
      region: { type: "string" },
      finish: { type: "boolean" },
      server: { type: "string" },
    },
    USAGE,
    true,
  );
  const location = values.remote ? "remote" : "local";
  // A server is reached locally only, and never with the files of another state directory.
  if (values.server !== undefined && (values.remote || values["persist-to"] !== undefined))
    refuseServerWith(values.remote ? "remote" : "persist-to", USAGE);
  const server = serverOption(values.server, USAGE);
  try {
    if (positionals[0] === "migrate" && (values.local || values.remote)) {
      await migrate(values.env, location, values["persist-to"], server);
    } else if (positionals[0] === "status") {
      if (!(await status(values.env, location, server))) process.exitCode = 1;
    } else if (positionals[0] === "move") {
      await move(values, location, server);
    } else {
      refuse("give one command: migrate --local|--remote, status or move", USAGE);
    }
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  }
}
