// Where a running `npm start` or `npm run demo` says it serves: written by dev/dev.ts and
// dev/demo.ts, read by the operator commands (dev/local-d1.ts) to go through its
// gateway instead of the files it holds. No node:sqlite here, so `npm start` itself loads none.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";

export interface DevServer {
  /** The command serving: `npm start` or `npm run demo`. */
  name: string;
  /** The wrangler environment it serves; null for the top level. */
  env: string | null;
  url: string;
  /** The operator gateway's bearer token (dev/dev-worker.ts). */
  token: string;
  /** Over https: the certificate it serves (PEM), trusted for this server alone. */
  ca?: string;
  pid: number;
}

const ROOT = path.join(import.meta.dirname, "..");
export const DEV_SERVER_FILE = path.join(ROOT, ".wrangler", "dev-server.json");
/** The demo's, beside its own database (.wrangler/demo). */
export const DEMO_SERVER_FILE = path.join(ROOT, ".wrangler", "demo", "dev-server.json");

function running(file: string): DevServer | null {
  if (!existsSync(file)) return null;
  const server = JSON.parse(readFileSync(file, "utf8")) as DevServer;
  try {
    process.kill(server.pid, 0);
  } catch {
    return null;
  }
  return server;
}

/**
 * The running `npm start` or `npm run demo` of this environment, or null when none is (a stale
 * file is ignored). Both at once serve it on two databases: which one a command means is not
 * for it to guess, so it fails.
 */
export function devServerOf(env: string | undefined): DevServer | null {
  const servers = [DEV_SERVER_FILE, DEMO_SERVER_FILE]
    .map(running)
    .filter((server) => server !== null && server.env === (env ?? null)) as DevServer[];
  if (servers.length > 1)
    throw new Error(
      `${servers.map(({ name, pid, url }) => `${name} (pid ${pid}, ${url})`).join(" and ")} both serve ${env === undefined ? "the top-level environment" : `env ${env}`}, each on a database of its own: stop one, then run the command again`,
    );
  return servers[0] ?? null;
}

/** The wrangler environment the running `npm start` serves; undefined for the top level or when none runs. */
export function servedEnv(): string | undefined {
  return running(DEV_SERVER_FILE)?.env ?? undefined;
}

/**
 * A development key set (`npm run ssf:keys` / `token:keys` `new`) made once and kept in `file`,
 * so that verifiers' caches stay good across restarts; its text, for a secrets file.
 */
export function devKeySet(file: string, secret: "SSF_SIGNING_KEYS" | "ACCESS_TOKEN_KEYS"): string {
  if (!existsSync(file)) {
    const script = path.join(import.meta.dirname, "..", "scripts", "signing-keys.ts");
    writeFileSync(file, execFileSync(process.execPath, [script, secret, "new"]), { mode: 0o600 });
  }
  return readFileSync(file, "utf8").trim();
}

/** A file only this user may read, written anew (a file left behind keeps its old mode). */
export function writePrivate(file: string, text: string): void {
  rmSync(file, { force: true });
  writeFileSync(file, text, { mode: 0o600 });
}

function fail(problem: string): never {
  console.error(problem);
  process.exit(1);
}

/** `--name value` or `--name=value` among wrangler's arguments. */
export function optionOf(args: string[], name: string): string | undefined {
  const index = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
  if (index === -1) return undefined;
  const arg = args[index] as string;
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : args[index + 1];
}

/** `--env <name>` / `--env=<name>` / `-e <name>` among wrangler-style arguments. */
export function envOf(args: string[]): string | undefined {
  for (const [index, arg] of args.entries()) {
    if (arg === "--env" || arg === "-e") return args[index + 1];
    if (arg.startsWith("--env=")) return arg.slice("--env=".length);
  }
  return undefined;
}

/**
 * Over https, the certificate the server presents, which the operator commands trust for it
 * and for nothing else: the one given to wrangler, or else one made in `dir` for this host (the
 * certificate miniflare would use has its private key published in its package).
 */
function certificate(args: string[], host: string, dir: string): { pem: string; wranglerEnv: Record<string, string> } {
  const givenKey = optionOf(args, "https-key-path") ?? process.env.WRANGLER_HTTPS_KEY_PATH;
  const givenCert = optionOf(args, "https-cert-path") ?? process.env.WRANGLER_HTTPS_CERT_PATH;
  if (givenKey !== undefined || givenCert !== undefined) {
    if (givenKey === undefined || givenCert === undefined || !existsSync(givenCert))
      fail("--local-protocol https: give both --https-key-path and --https-cert-path, of files that exist, or neither");
    return { pem: readFileSync(givenCert, "utf8"), wranglerEnv: {} };
  }
  // The key's directory is this user's alone, whatever mode openssl gives the key.
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

/** Where a server is about to serve, and what it holds until it exits. */
export interface Announcement {
  /** The command serving, as a command that meets it names it: `npm start` or `npm run demo`. */
  name: string;
  /** Its record, read by the operator commands. */
  file: string;
  /** wrangler's arguments: its host, port and protocol are read from them. */
  args: string[];
  env: string | undefined;
  /** Where a certificate is made for https, unless one is given. */
  httpsDir: string;
  /** The file of its local secrets (the token among them), removed at its exit. */
  secrets: string;
  /** Its own files brought up to date, before it serves them and before it is announced done. */
  migrate(): Promise<void>;
}

/**
 * Writes to `file` where the server is about to serve: its URL, a new token and, over https,
 * its certificate (made in `httpsDir` unless given); then migrates its files, or forgets all
 * and exits. Answers the record, the environment wrangler needs for that certificate, and
 * `forget`, for its exit: the record (while still its own) and the secrets go.
 */
export async function announceDevServer(
  announcement: Announcement,
): Promise<{ server: DevServer; wranglerEnv: Record<string, string>; forget(): void }> {
  const { name, file, args, env, httpsDir, secrets } = announcement;
  const host = optionOf(args, "ip") ?? "localhost";
  const https = (optionOf(args, "local-protocol") ?? "http") === "https" ? certificate(args, host, httpsDir) : null;
  const server: DevServer = {
    name,
    env: env ?? null,
    url: `${https ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${optionOf(args, "port") ?? 8787}`,
    token: randomBytes(32).toString("base64url"),
    pid: process.pid,
    ...(https ? { ca: https.pem } : {}),
  };
  mkdirSync(path.dirname(file), { recursive: true });
  writePrivate(file, JSON.stringify(server));
  const forget = () => {
    // Only while it is still ours: another server of the same kind may have started since.
    if (running(file)?.pid === process.pid) rmSync(file, { force: true });
    rmSync(secrets, { force: true });
  };
  try {
    await announcement.migrate();
  } catch (error) {
    forget();
    fail(error instanceof Error ? error.message : String(error));
  }
  return { server, wranglerEnv: https?.wranglerEnv ?? {}, forget };
}

/**
 * The files of local vars wrangler reads for a config in the project's root, when given no
 * --env-file: `.dev.vars[.<env>]`, else the `.env` files.
 */
export function localVarsFiles(env: string | undefined): string[] {
  const devVars = [...(env ? [`.dev.vars.${env}`] : []), ".dev.vars"].find((file) => existsSync(path.join(ROOT, file)));
  if (devVars) return [devVars];
  return [".env", ".env.local", ...(env ? [`.env.${env}`, `.env.${env}.local`] : [])].filter((file) =>
    existsSync(path.join(ROOT, file)),
  );
}
