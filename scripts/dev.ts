// `npm start` / `npm run dev`: applies migrations to every local database of the chosen
// environment, then runs `wrangler dev` with the same arguments on scripts/dev-worker.ts
// (the service plus the operator gateway the commands write through), e.g.
//   npm start -- --port 8788          npm start -- --env sharded
//   npm start -- --local-protocol https     (a certificate made here, or --https-key-path and --https-cert-path)
// While it runs, .wrangler/dev-server.json tells the operator commands where that gateway is,
// its token and, over https, the certificate to trust; a command started during the
// migrations waits for the server. No secret goes on wrangler's command line, which every
// user of the machine can read (`ps`): wrangler reads them from a file only this user can.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import { DEV_SERVER_FILE, type DevServer } from "./dev-server.ts";
import { envOf, migrate } from "./shards.ts";

const ROOT = path.join(import.meta.dirname, "..");
const STATE = path.dirname(DEV_SERVER_FILE);
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
const protocol = option("local-protocol") ?? "http";

/** A file only this user may read, written anew (a file left behind keeps its old mode). */
function writePrivate(file: string, text: string): void {
  rmSync(file, { force: true });
  writeFileSync(file, text, { mode: 0o600 });
}

function fail(problem: string): never {
  console.error(problem);
  process.exit(1);
}

/**
 * Over https, the certificate the server presents, which the operator commands trust for it
 * and for nothing else: the one given to wrangler, or else one made here for this host (the
 * certificate miniflare would use has its private key published in its package).
 */
function certificate(): { pem: string; wranglerEnv: Record<string, string> } {
  const givenKey = option("https-key-path") ?? process.env.WRANGLER_HTTPS_KEY_PATH;
  const givenCert = option("https-cert-path") ?? process.env.WRANGLER_HTTPS_CERT_PATH;
  if (givenKey !== undefined || givenCert !== undefined) {
    if (givenKey === undefined || givenCert === undefined || !existsSync(givenCert))
      fail("--local-protocol https: give both --https-key-path and --https-cert-path, of files that exist, or neither");
    return { pem: readFileSync(givenCert, "utf8"), wranglerEnv: {} };
  }
  // The key's directory is this user's alone, whatever mode openssl gives the key.
  const dir = path.join(STATE, "dev-https");
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o700);
  const [key, cert] = [path.join(dir, "key.pem"), path.join(dir, "cert.pem")];
  const names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1", ...(isIP(host) ? [`IP:${host}`] : [`DNS:${host}`])];
  try {
    execFileSync(
      "openssl",
      [
        ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
        ...["-keyout", key, "-out", cert, "-days", "30", "-subj", "/CN=npm start"],
        ...["-addext", `subjectAltName=${[...new Set(names)].join(",")}`],
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
  } catch (error) {
    fail(
      `--local-protocol https: making a certificate with openssl failed (${error instanceof Error ? error.message : error}); install openssl, or give --https-key-path and --https-cert-path`,
    );
  }
  return {
    pem: readFileSync(cert, "utf8"),
    wranglerEnv: { WRANGLER_HTTPS_KEY_PATH: key, WRANGLER_HTTPS_CERT_PATH: cert },
  };
}

const https = protocol === "https" ? certificate() : null;
const server: DevServer = {
  env: env ?? null,
  url: `${protocol}://${host.includes(":") ? `[${host}]` : host}:${option("port") ?? 8787}`,
  token: randomBytes(32).toString("base64url"),
  pid: process.pid,
  ...(https ? { ca: https.pem } : {}),
};
mkdirSync(STATE, { recursive: true });
writePrivate(DEV_SERVER_FILE, JSON.stringify(server));
const secrets = path.join(STATE, `dev-secrets-${process.pid}.env`);
const forget = () => {
  rmSync(DEV_SERVER_FILE, { force: true });
  rmSync(secrets, { force: true });
};

try {
  await migrate(env, "local", option("persist-to"));
} catch (error) {
  forget();
  fail(error instanceof Error ? error.message : String(error));
}
// The Shared Signals transmitter runs too: this server's URL as its issuer, and a development
// key made once (npm run ssf:keys) and kept with the local state, so receivers' caches stay good.
// Push streams may point at a receiver on this machine (http, loopback): development only.
const devKeys = path.join(STATE, "ssf-dev-keys.json");
if (!existsSync(devKeys)) {
  const keys = execFileSync(process.execPath, [path.join(import.meta.dirname, "ssf-keys.ts"), "new"]);
  writeFileSync(devKeys, keys, { mode: 0o600 });
}
// Single quotes: dotenv takes the JSON as it is.
writePrivate(secrets, `OPERATOR_TOKEN=${server.token}\nSSF_SIGNING_KEYS='${readFileSync(devKeys, "utf8").trim()}'\n`);
/**
 * With --env-file wrangler reads no other file of local vars, so the ones it would have read
 * (`.dev.vars[.<env>]`, else the `.env` files) follow ours and keep overriding, as without it.
 */
function localVarsFiles(): string[] {
  if (option("env-file") !== undefined) return [];
  const devVars = [...(env ? [`.dev.vars.${env}`] : []), ".dev.vars"].find((file) => existsSync(path.join(ROOT, file)));
  if (devVars) return [devVars];
  return [".env", ".env.local", ...(env ? [`.env.${env}`, `.env.${env}.local`] : [])].filter((file) =>
    existsSync(path.join(ROOT, file)),
  );
}
const vars = [
  ...["--var", `SSF_ISSUER:${server.url}`, "--var", "SSF_ALLOW_PRIVATE_PUSH:true"],
  ...[secrets, ...localVarsFiles()].flatMap((file) => ["--env-file", file]),
];
const dev = spawn("npx", ["wrangler", "dev", "scripts/dev-worker.ts", ...vars, ...args], {
  stdio: "inherit",
  // Wrangler reads no --env-file when CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV is "false" in the caller's environment.
  env: { ...process.env, CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV: "true", ...https?.wranglerEnv },
});
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => dev.kill(signal));
dev.on("close", (code, signal) => {
  forget();
  process.exit(code ?? (signal ? 1 : 0));
});
