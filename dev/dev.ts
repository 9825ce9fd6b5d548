// `npm start` / `npm run dev`: applies migrations to every local database of the chosen
// environment, then runs `wrangler dev` with the same arguments on dev/dev-worker.ts
// (the service plus the operator gateway the commands write through), e.g.
//   npm start -- --port 8788          npm start -- --env sharded
//   npm start -- --local-protocol https     (a certificate made here, or --https-key-path and --https-cert-path)
// While it runs, .wrangler/servers/<pid>.json tells the operator commands where that gateway is,
// its token and, over https, the certificate to trust (one record per server: a second
// `npm start` on another port leaves the first reachable, with --server <port>); a command
// started during the migrations waits for the server. No secret goes on wrangler's command line, which every
// user of the machine can read (`ps`): wrangler reads them from a file only this user can.
import { spawn } from "node:child_process";
import path from "node:path";
import { adminKeysSecret } from "./admin-key-file.ts";
import {
  announceDevServer,
  DEV_SERVERS_DIR,
  devKeySet,
  envOf,
  localVarsFiles,
  optionOf,
  writePrivate,
} from "./dev-server.ts";
import { applyMigrations } from "./migrations.ts";

const STATE = path.dirname(DEV_SERVERS_DIR);
const args = process.argv.slice(2);
const env = envOf(args);
const secrets = path.join(STATE, `dev-secrets-${process.pid}.env`);
const { server, wranglerEnv, forget } = await announceDevServer({
  name: "npm start",
  dir: DEV_SERVERS_DIR,
  args,
  env,
  httpsDir: path.join(STATE, "dev-https"),
  secrets,
  migrate: () => applyMigrations(env, "local", optionOf(args, "persist-to")),
});
// The Shared Signals transmitter and access tokens run too: this server's URL as their issuer
// (and the tokens' audience), each with a development key set kept with the local state.
// Push streams may point at a receiver on this machine (http, loopback): development only.
const ssfKeys = devKeySet(path.join(STATE, "ssf-dev-keys.json"), "SSF_SIGNING_KEYS");
const tokenKeys = devKeySet(path.join(STATE, "access-token-dev-keys.json"), "ACCESS_TOKEN_KEYS");
// The admin API, once `npm run admin:keys -- create` made a key (read at start).
const adminKeys = adminKeysSecret();
// Single quotes: dotenv takes the JSON as it is.
writePrivate(
  secrets,
  `OPERATOR_TOKEN=${server.token}\nSSF_SIGNING_KEYS='${ssfKeys}'\nACCESS_TOKEN_KEYS='${tokenKeys}'\nADMIN_KEYS='${adminKeys}'\n`,
);
// With --env-file wrangler reads no other file of local vars, so the ones it would have read
// follow ours and keep overriding, as without it.
const vars = [
  ...["--var", `SSF_ISSUER:${server.url}`, "--var", "SSF_ALLOW_PRIVATE_PUSH:true"],
  ...["--var", `ACCESS_TOKEN_ISSUER:${server.url}`, "--var", `ACCESS_TOKEN_AUDIENCE:${server.url}`],
  ...[secrets, ...(optionOf(args, "env-file") === undefined ? localVarsFiles(env) : [])].flatMap((file) => [
    "--env-file",
    file,
  ]),
];
const dev = spawn("npx", ["wrangler", "dev", "dev/dev-worker.ts", ...vars, ...args], {
  stdio: "inherit",
  // Wrangler reads no --env-file when CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV is "false" in the caller's environment.
  env: { ...process.env, CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "true", ...wranglerEnv },
});
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => dev.kill(signal));
dev.on("close", (code, signal) => {
  forget();
  process.exit(code ?? (signal ? 1 : 0));
});
