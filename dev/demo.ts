// `npm run demo`: the session service and examples/login-worker in one `wrangler dev` (the
// login worker first, so it is the one served; it forwards /auth/* to the service), on a local
// database of their own under .wrangler/demo. Open http://localhost:8787, sign in as alice or
// bob (password: wonderland), and see "Your devices"; or as dana, an employee of Globex, a
// business customer whose organization (8-hour sessions, 15 minutes idle, at most 3 devices)
// the demo creates at start, as its rules line on her devices page says. Extra arguments go to wrangler, e.g.
//   npm run demo -- --port 8790
//   npm run demo -- --local-protocol https     (device binding needs HTTPS; docs/browsers.md;
//                                               a certificate made here, or --https-key-path and --https-cert-path)
// wrangler applies --var only to the first worker, so the service's vars are overridden from
// the environment instead: SESSION_BOUND_COOKIE_SECONDS=130 npm run demo
// While it runs the operator commands (session:*, db:*, shards:move) work on the demo's
// database, as on npm start's: the service runs with the operator gateway
// (dev/dev-worker.ts), the first worker passes /__operator/* to it
// (dev/demo-worker.ts), and .wrangler/demo/servers/<pid>.json says where, with its token and,
// over https, the certificate to trust. The token reaches the service in a file only this
// user can read, never on a command line. DEMO_STATE=<dir> runs it on a fresh database of its
// own there instead, which no operator command finds (test/browser/report.spec.ts needs a user
// with no device history).
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parse } from "smol-toml";
import { GLOBEX } from "../examples/login-worker/src/companies.ts";
import { createOrganization } from "../src/services/organizations/directory.ts";
import { replaceOrganizationPolicy } from "../src/services/organizations/policy.ts";
import { openScope } from "../src/services/scope.ts";
import { announceDevServer, DEMO_SERVERS_DIR, devKeySet, localVarsFiles, writePrivate } from "./dev-server.ts";
import { openThroughServer } from "./local-d1.ts";
import { applyMigrations } from "./migrations.ts";

const ROOT = path.join(import.meta.dirname, "..");
const STATE = process.env.DEMO_STATE ?? path.dirname(DEMO_SERVERS_DIR);
/** Wrangler reads a second worker's local secrets from the .dev.vars beside its config. */
const SECRETS = path.join(STATE, ".dev.vars");

interface ServiceToml {
  main: string;
  vars: Record<string, string>;
  d1_databases: { migrations_dir: string }[];
  env?: unknown;
}

/**
 * wrangler.toml's top level as the demo's service: dev/dev-worker.ts (the service and its
 * operator gateway), its vars overridden by SESSION_* from the environment, paths made absolute.
 */
function serviceConfig(origin: string): string {
  const overrides = Object.entries(process.env).filter(([name]) => name.startsWith("SESSION_"));
  const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  const { env: _environments, ...config } = parse(toml) as unknown as ServiceToml;
  const derived = {
    ...config,
    main: path.join(ROOT, "dev", "dev-worker.ts"),
    // Access tokens on, issued by and for the demo's origin, so a newcomer can try POST /auth/token.
    vars: {
      ...config.vars,
      ACCESS_TOKEN_ISSUER: origin,
      ACCESS_TOKEN_AUDIENCE: origin,
      ...Object.fromEntries(overrides),
    },
    d1_databases: config.d1_databases.map((database) => ({
      ...database,
      migrations_dir: path.join(ROOT, database.migrations_dir),
    })),
  };
  const file = path.join(STATE, "session-service.json");
  writeFileSync(file, JSON.stringify(derived, null, 2));
  return file;
}

const args = process.argv.slice(2);
const { server, wranglerEnv, forget } = await announceDevServer({
  name: "npm run demo",
  dir: path.join(STATE, path.basename(DEMO_SERVERS_DIR)),
  args,
  env: undefined,
  httpsDir: path.join(STATE, "https"),
  secrets: SECRETS,
  migrate: () => applyMigrations(undefined, "local", STATE),
});
// The project's local vars, as the service would read them beside wrangler.toml, then the token.
const localVars = localVarsFiles(undefined).map((file) => readFileSync(path.join(ROOT, file), "utf8"));
const tokenKeys = devKeySet(path.join(STATE, "access-token-dev-keys.json"), "ACCESS_TOKEN_KEYS");
// Single quotes: dotenv takes the JSON as it is.
writePrivate(SECRETS, [...localVars, `OPERATOR_TOKEN=${server.token}\nACCESS_TOKEN_KEYS='${tokenKeys}'\n`].join("\n"));
const dev = spawn(
  "npx",
  [
    ...["wrangler", "dev", "dev/demo-worker.ts"],
    ...["--config", "examples/login-worker/wrangler.toml", "--config", serviceConfig(server.url)],
    ...["--persist-to", STATE],
    ...args,
  ],
  { stdio: "inherit", cwd: ROOT, env: { ...process.env, ...wranglerEnv } },
);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => dev.kill(signal));
dev.on("close", (code, signal) => {
  forget();
  process.exit(code ?? (signal ? 1 : 0));
});

/**
 * Globex onboarded, as a product onboards a business customer: its organization and its
 * policy (examples/login-worker/src/companies.ts), once the service answers, by the admin
 * API's own code on the demo's database (through the operator gateway). Again at every start:
 * the same id and name answer the organization made before, and the policy is written anew.
 */
async function onboardGlobex(): Promise<void> {
  const project = await openThroughServer(server);
  const scope = openScope(project.env as unknown as Env);
  await createOrganization(scope, { id: GLOBEX.id, name: GLOBEX.name });
  await replaceOrganizationPolicy(scope, GLOBEX.id, GLOBEX.policy);
}
onboardGlobex().then(
  () => console.error(`npm run demo: ${GLOBEX.name} (${GLOBEX.id}) and its policy are set: sign in as dana`),
  (error) => console.error(`npm run demo: ${GLOBEX.name} was not set up, dana cannot sign in: ${error.message}`),
);
