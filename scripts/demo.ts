// `npm run demo`: the session service and examples/login-worker in one `wrangler dev` (the
// login worker first, so it is the one served; it forwards /auth/* to the service), on a local
// database of their own under .wrangler/demo. Open http://localhost:8787, sign in as alice or
// bob (password: wonderland), and see "Your devices". Extra arguments go to wrangler, e.g.
//   npm run demo -- --port 8790
//   npm run demo -- --local-protocol https     (device binding needs HTTPS; docs/integrating.md)
// wrangler applies --var only to the first worker, so the service's vars are overridden from
// the environment instead: SESSION_BOUND_COOKIE_SECONDS=20 npm run demo
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parse } from "smol-toml";
import { migrate } from "./shards.ts";

const STATE = ".wrangler/demo";

interface ServiceToml {
  main: string;
  vars: Record<string, string>;
  d1_databases: { migrations_dir: string }[];
  env?: unknown;
}

/** wrangler.toml's top level, its vars overridden by SESSION_* from the environment, paths made absolute. */
function serviceConfig(): string {
  const overrides = Object.entries(process.env).filter(([name]) => name.startsWith("SESSION_"));
  if (overrides.length === 0) return "wrangler.toml";
  const { env: _environments, ...config } = parse(readFileSync("wrangler.toml", "utf8")) as unknown as ServiceToml;
  const root = process.cwd();
  const derived = {
    ...config,
    main: path.join(root, config.main),
    vars: { ...config.vars, ...Object.fromEntries(overrides) },
    d1_databases: config.d1_databases.map((database) => ({
      ...database,
      migrations_dir: path.join(root, database.migrations_dir),
    })),
  };
  mkdirSync(STATE, { recursive: true });
  const file = path.join(STATE, "session-service.json");
  writeFileSync(file, JSON.stringify(derived, null, 2));
  return file;
}

await migrate(undefined, "local", STATE);
const dev = spawn(
  "npx",
  [
    "wrangler",
    "dev",
    "--config",
    "examples/login-worker/wrangler.toml",
    "--config",
    serviceConfig(),
    "--persist-to",
    STATE,
    ...process.argv.slice(2),
  ],
  { stdio: "inherit" },
);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => dev.kill(signal));
dev.on("close", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
