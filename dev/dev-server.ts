// Where each running `npm start` or `npm run demo` says it serves: written by dev/dev.ts and
// dev/demo.ts, one record per server (named by its pid, so a second server from the same
// checkout never hides the first), read by the operator commands (dev/local-d1.ts) to go
// through its gateway instead of the files it holds. Which server a command means is chosen
// here: the one serving its environment, or the one `--server <port|URL>` names; never a guess.
// No node:sqlite here, so `npm start` itself loads none.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, isIP } from "node:net";
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
/** The records of the running `npm start`s, `<pid>.json` each. */
export const DEV_SERVERS_DIR = path.join(ROOT, ".wrangler", "servers");
/** The demo's, beside its own database (.wrangler/demo). */
export const DEMO_SERVERS_DIR = path.join(ROOT, ".wrangler", "demo", "servers");

/** The record in `file`, while its server's process lives (a file left by a killed one is ignored). */
function running(file: string): DevServer | null {
  let server: DevServer;
  try {
    server = JSON.parse(readFileSync(file, "utf8")) as DevServer;
    process.kill(server.pid, 0);
  } catch {
    return null;
  }
  return server;
}

const recordsIn = (dir: string) =>
  existsSync(dir) ? readdirSync(dir).flatMap((name) => (name.endsWith(".json") ? [path.join(dir, name)] : [])) : [];

/** Every running `npm start` and `npm run demo` of this checkout, by port. */
export function runningServers(): DevServer[] {
  return [...recordsIn(DEV_SERVERS_DIR), ...recordsIn(DEMO_SERVERS_DIR)]
    .map(running)
    .filter((server) => server !== null)
    .sort((a, b) => portOf(a.url) - portOf(b.url) || a.pid - b.pid);
}

const portOf = (url: string) => {
  const { port, protocol } = new URL(url);
  return Number(port || (protocol === "https:" ? 443 : 80));
};

/** "the top-level environment" or "env <name>". */
export const environmentName = (env: string | null | undefined) =>
  env === null || env === undefined ? "the top-level environment" : `env ${env}`;

/** A server as the commands name it: `npm start at http://localhost:8787 (pid 4242, env sharded)`. */
export function describeServer({ name, url, pid, env }: DevServer): string {
  return `${name} at ${url} (pid ${pid}, ${env === null ? "top-level environment" : `env ${env}`})`;
}

/** The servers running, for a message: "running: …", or that none is. */
function runningList(servers: DevServer[] = runningServers()): string {
  return servers.length === 0
    ? "no npm start or npm run demo of this checkout is running"
    : `running: ${servers.map(describeServer).join("; ")}`;
}

/** The server `--server` names: a port of this machine, or a URL. */
export interface ServerAsked {
  /** As given, for messages. */
  given: string;
  port: number;
  /** The URL given, or null for a bare port. */
  url: URL | null;
}

/** `--server`'s value read: a port (1-65535) or an http(s) URL; anything else throws a RangeError saying so. */
export function serverAsked(value: string): ServerAsked {
  if (/^\d+$/.test(value)) {
    const port = Number(value);
    if (port >= 1 && port <= 65_535) return { given: value, port, url: null };
  } else if (URL.canParse(value)) {
    const url = new URL(value);
    if ((url.protocol === "http:" || url.protocol === "https:") && url.pathname === "/" && !url.search)
      return { given: value, port: portOf(url.href), url };
  }
  throw new RangeError(
    `--server ${value}: give the port of a running npm start or npm run demo (e.g. --server 8788) or its URL (e.g. --server http://localhost:8788)`,
  );
}

/** Host names that all mean this machine's loopback, or every address of it. */
const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]", "0.0.0.0", "[::]"]);
const sameHost = (a: string, b: string) => a === b || (LOCAL_HOSTS.has(a) && LOCAL_HOSTS.has(b));

/** Whether anything accepts a TCP connection at the address asked (loopback for a bare port). */
export function somethingListens(asked: ServerAsked): Promise<boolean> {
  const host = asked.url ? asked.url.hostname.replace(/^\[(.*)\]$/, "$1") : "localhost";
  return new Promise((resolve) => {
    const socket = connect({ host, port: asked.port, timeout: 2000 });
    const done = (listening: boolean) => {
      socket.destroy();
      resolve(listening);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.once("timeout", () => done(false));
  });
}

/**
 * The recorded servers a command may mean, before any is asked: with `asked`, those recorded
 * at its port (one, or two while a second server started on a taken port is still failing),
 * whatever they serve; without, the one serving `env` (undefined: the top level), or none.
 * Throws, saying what to do, when the choice is not the command's to make: two servers of
 * `env` at once, or nothing of this checkout at the address asked. Nothing has been done then.
 */
export async function serversFor(env: string | undefined, asked?: ServerAsked): Promise<DevServer[]> {
  const servers = runningServers();
  if (asked === undefined) {
    const serving = servers.filter((server) => server.env === (env ?? null));
    if (serving.length > 1)
      throw new Error(
        `${serving.map(describeServer).join(" and ")} ${serving.length === 2 ? "both" : "all"} serve ${environmentName(env)}: which one a command means is not for it to guess, so nothing was done. Name one with --server <port>`,
      );
    return serving;
  }
  const atPort = servers.filter((server) => portOf(server.url) === asked.port);
  if (atPort.length === 0) {
    const where = asked.url?.origin ?? `port ${asked.port}`;
    throw new Error(
      (await somethingListens(asked))
        ? `--server ${asked.given}: what answers at ${where} is no npm start or npm run demo of this checkout; nothing was done (${runningList(servers)})`
        : `--server ${asked.given}: nothing listens at ${where}; nothing was done (${runningList(servers)})`,
    );
  }
  const { url } = asked;
  for (const server of atPort) {
    const recorded = new URL(server.url);
    if (url && (url.protocol !== recorded.protocol || !sameHost(url.hostname, recorded.hostname)))
      throw new Error(`--server ${asked.given}: port ${asked.port} is ${describeServer(server)}; nothing was done`);
    if (env !== undefined && server.env !== env)
      throw new Error(
        `--server ${asked.given} is ${describeServer(server)}, not a server of ${environmentName(env)}: drop --env ${env}, or name a server of it; nothing was done`,
      );
  }
  return atPort;
}

/** How a command says which server it talks to: one line on stderr, beside its answer on stdout. */
export const toStderr = (line: string) => void process.stderr.write(`${line}\n`);

/** Set for the `db:migrate:local` a command runs on the files: it said so already. */
export const SAID_ENV = "OPERATOR_SERVER_SAID";

/**
 * What a command says when no server serves its environment: it works on the local files, and
 * which servers run (of other environments), so that a forgotten `--env` shows.
 */
export function onTheFiles(env: string | undefined): string {
  const others = runningServers();
  return `server: none (no npm start or npm run demo serves ${environmentName(env)}): the local files under .wrangler/state${others.length === 0 ? "" : `; ${runningList(others)}`}`;
}

/**
 * The wrangler environment the running `npm start`s serve, when they all serve one; undefined
 * for the top level, when none runs, or when they serve several.
 */
export function servedEnv(): string | undefined {
  const envs = new Set(runningServers().flatMap((server) => (server.name === "npm start" ? [server.env] : [])));
  return envs.size === 1 ? ([...envs][0] ?? undefined) : undefined;
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
  /** Where its record goes, `<pid>.json`, read by the operator commands. */
  dir: string;
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
 * Writes to `dir` where the server is about to serve: its URL, a new token and, over https,
 * its certificate (made in `httpsDir` unless given); then migrates its files, or forgets all
 * and exits. Answers the record, the environment wrangler needs for that certificate, and
 * `forget`, for its exit: the record and the secrets go. Records left by killed servers go
 * now; a server of the same environment already running is named, with how to choose.
 */
export async function announceDevServer(
  announcement: Announcement,
): Promise<{ server: DevServer; wranglerEnv: Record<string, string>; forget(): void }> {
  const { name, dir, args, env, httpsDir, secrets } = announcement;
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
  mkdirSync(dir, { recursive: true });
  for (const left of recordsIn(dir)) if (running(left) === null) rmSync(left, { force: true });
  const file = path.join(dir, `${process.pid}.json`);
  writePrivate(file, JSON.stringify(server));
  const others = runningServers().filter((other) => other.pid !== process.pid && other.env === server.env);
  if (others.length > 0)
    process.stderr.write(
      `${others.map(describeServer).join("; ")} serves ${environmentName(env)} too: the operator commands of it need --server <port> while both run\n`,
    );
  const forget = () => {
    rmSync(file, { force: true });
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
