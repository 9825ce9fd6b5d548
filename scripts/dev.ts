// `npm start` / `npm run dev`: applies migrations to every local database of the chosen
// environment, then runs `wrangler dev` with the same arguments on scripts/dev-worker.ts
// (the service plus the operator gateway the commands write through), e.g.
//   npm start -- --port 8788          npm start -- --env sharded
// While it runs, .wrangler/dev-server.json tells the operator commands where that gateway is
// and its token; a command started during the migrations waits for the server.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DEV_SERVER_FILE, type DevServer } from "./dev-server.ts";
import { envOf, migrate } from "./shards.ts";

const args = process.argv.slice(2);
/** `--name value` or `--name=value` among wrangler's arguments. */
const option = (name: string) => {
  const index = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
  if (index === -1) return undefined;
  const arg = args[index] as string;
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : args[index + 1];
};
const env = envOf(args);
const host = option("ip") ?? "localhost";
const server: DevServer = {
  env: env ?? null,
  url: `${option("local-protocol") ?? "http"}://${host.includes(":") ? `[${host}]` : host}:${option("port") ?? 8787}`,
  token: randomBytes(32).toString("base64url"),
  pid: process.pid,
};
mkdirSync(path.dirname(DEV_SERVER_FILE), { recursive: true });
writeFileSync(DEV_SERVER_FILE, JSON.stringify(server));
const forget = () => rmSync(DEV_SERVER_FILE, { force: true });

try {
  await migrate(env, "local", option("persist-to"));
} catch (error) {
  forget();
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
// The Shared Signals transmitter runs too: this server's URL as its issuer, and a development
// key made once (npm run ssf:keys) and kept with the local state, so receivers' caches stay good.
// Push streams may point at a receiver on this machine (http, loopback): development only.
const devKeys = path.join(path.dirname(DEV_SERVER_FILE), "ssf-dev-keys.json");
if (!existsSync(devKeys)) {
  const keys = execFileSync(process.execPath, [path.join(import.meta.dirname, "ssf-keys.ts"), "new"]);
  writeFileSync(devKeys, keys, { mode: 0o600 });
}
const transmitter = [
  ["--var", `SSF_ISSUER:${server.url}`],
  ["--var", `SSF_SIGNING_KEYS:${readFileSync(devKeys, "utf8").trim()}`],
  ["--var", "SSF_ALLOW_PRIVATE_PUSH:true"],
].flat();
const dev = spawn(
  "npx",
  ["wrangler", "dev", "scripts/dev-worker.ts", "--var", `OPERATOR_TOKEN:${server.token}`, ...transmitter, ...args],
  {
    stdio: "inherit",
  },
);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => dev.kill(signal));
dev.on("close", (code, signal) => {
  forget();
  process.exit(code ?? (signal ? 1 : 0));
});
