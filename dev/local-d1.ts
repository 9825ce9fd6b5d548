// Opens the local D1 that `npm start` (wrangler dev) serves, for the operator commands, in
// tens of milliseconds, behind the few D1 methods Drizzle's D1 driver calls:
// - while `npm start` (or `npm run demo`, on its own database) serves the environment, or the
//   one `--server <port|URL>` names, through its operator gateway (dev/dev-worker.ts): workerd
//   holds the SQLite files then, and a second writer would make the server's own requests fail
//   with "database is locked";
// - otherwise the SQLite file wrangler keeps under .wrangler/state, opened with node:sqlite.
// Either way one line on stderr ("server: …") says which, before anything is done; stdout
// stays the command's own answer.
// Importing wrangler (for getPlatformProxy) alone takes over a second, and its local D1 is a
// second workerd on the same files: neither would do. Migrations are applied only when behind.
import { execFileSync } from "node:child_process";
import { createHash, createHmac } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import path from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { parseEnv } from "node:util";
import { parse } from "smol-toml";
import type { ConfigVars } from "../src/domain/config.ts";
import {
  type DevServer,
  describeServer,
  onTheFiles,
  SAID_ENV,
  type ServerAsked,
  serversFor,
  toStderr,
} from "./dev-server.ts";

const ROOT = path.join(import.meta.dirname, "..");
const STATE = path.join(ROOT, ".wrangler", "state", "v3", "d1", "miniflare-D1DatabaseObject");

interface WranglerEnv {
  vars: Record<string, string>;
  d1_databases: { binding: string; database_id: string; migrations_dir?: string }[];
}

/** `[vars]` and `[[d1_databases]]` of wrangler.toml, or of its `[env.<name>]` (which inherits neither). */
function readWranglerToml(env: string | undefined): WranglerEnv {
  const toml = parse(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8")) as Partial<WranglerEnv> & {
    env?: Record<string, Partial<WranglerEnv>>;
  };
  const chosen = env === undefined ? toml : toml.env?.[env];
  if (!chosen) throw new Error(`wrangler.toml has no [env.${env}]`);
  return { vars: chosen.vars ?? {}, d1_databases: chosen.d1_databases ?? [] };
}

/** Where miniflare keeps a local D1: a Durable Object named by the database id (workerd's idFromName). */
function sqlitePath(databaseId: string): string {
  const key = createHash("sha256").update("miniflare-D1DatabaseObject").digest();
  const name = createHmac("sha256", key).update(databaseId).digest().subarray(0, 16);
  const mac = createHmac("sha256", key).update(name).digest().subarray(0, 16);
  return path.join(STATE, `${Buffer.concat([name, mac]).toString("hex")}.sqlite`);
}

function isBehind(file: string, migrationsDir: string): boolean {
  if (!existsSync(file)) return true;
  const wanted = readdirSync(path.join(ROOT, migrationsDir)).filter((name) => name.endsWith(".sql"));
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'd1_migrations'").get();
    if (!table) return true;
    const applied = new Set(
      db
        .prepare("SELECT name FROM d1_migrations")
        .all()
        .map((row) => row.name),
    );
    return wanted.some((name) => !applied.has(name));
  } finally {
    db.close();
  }
}

type Row = Record<string, unknown>;
type Method = "all" | "first" | "raw" | "run" | "batch";

/** Where a local D1's statements run: the SQLite file itself, or the running server's gateway. */
interface Backend {
  execute(method: Method, statements: LocalStatement[]): Promise<unknown>;
}

/** The D1 statement methods Drizzle's D1 driver uses, handed to a backend. */
class LocalStatement {
  readonly backend: Backend;
  readonly query: string;
  readonly params: unknown[];

  constructor(backend: Backend, query: string, params: unknown[] = []) {
    this.backend = backend;
    this.query = query;
    this.params = params;
  }

  bind(...params: unknown[]): LocalStatement {
    return new LocalStatement(this.backend, this.query, params);
  }

  all() {
    return this.backend.execute("all", [this]);
  }

  first(column?: string) {
    return this.backend.execute("first", [this]).then((row) => (row && column ? (row as Row)[column] : row));
  }

  raw() {
    return this.backend.execute("raw", [this]);
  }

  run() {
    return this.backend.execute("run", [this]);
  }
}

function localD1(backend: Backend): D1Database {
  return {
    prepare: (query: string) => new LocalStatement(backend, query),
    batch: (statements: LocalStatement[]) => backend.execute("batch", statements),
  } as unknown as D1Database;
}

/** The SQLite file, opened with node:sqlite: only while no `npm start` serves it. */
function fileBackend(db: DatabaseSync): Backend {
  const prepared = ({ query }: LocalStatement, arrays = false): StatementSync => {
    const statement = db.prepare(query);
    statement.setReturnArrays(arrays);
    return statement;
  };
  const all = (statement: LocalStatement) => ({
    results: prepared(statement).all(...(statement.params as never[])) as Row[],
    success: true,
    meta: {},
  });
  return {
    async execute(method, statements) {
      const [statement] = statements as [LocalStatement];
      const params = statement.params as never[];
      if (method === "all") return all(statement);
      if (method === "first") return prepared(statement).get(...params) ?? null;
      if (method === "raw") return prepared(statement, true).all(...params);
      if (method === "run") {
        const { changes, lastInsertRowid } = prepared(statement).run(...params);
        return { results: [], success: true, meta: { changes: Number(changes), last_row_id: Number(lastInsertRowid) } };
      }
      // A D1 batch is one transaction; so is this.
      db.exec("BEGIN IMMEDIATE");
      try {
        const results = statements.map(all);
        db.exec("COMMIT");
        return results;
      } catch (error) {
        db.exec("ROLLBACK");
        throw error;
      }
    },
  };
}

/** How long a command waits for a starting `npm start` (its migrations, wrangler's start). */
const SERVER_WAIT_MS = 60_000;

/** The gateway's answer: its status and JSON body. */
interface GatewayAnswer {
  status: number;
  body: unknown;
}

/**
 * A call to the gateway, with the server's token (`token` null: none, as a stranger would
 * call); over https, trusting the certificate the server wrote and no other.
 */
export function gatewayCall(
  server: DevServer,
  path: string,
  body?: object,
  token: string | null = server.token,
): Promise<GatewayAnswer> {
  const url = new URL(path, server.url);
  const payload = body ? JSON.stringify(body) : undefined;
  return new Promise((resolve, reject) => {
    const request = (url.protocol === "https:" ? https : http).request(
      url,
      {
        ...(server.ca ? { ca: server.ca } : {}),
        method: payload ? "POST" : "GET",
        headers: {
          ...(token === null ? {} : { Authorization: `Bearer ${token}` }),
          "Content-Type": "application/json",
        },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        response.on("data", (chunk) => (text += chunk));
        response.on("end", () => {
          try {
            resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) });
          } catch {
            reject(
              new Error(
                `${server.name} at ${server.url} answered ${response.statusCode} without JSON: ${text.slice(0, 200)}`,
              ),
            );
          }
        });
      },
    );
    request.on("error", reject);
    request.end(payload);
  });
}

/** Errors of a server not listening yet (still migrating, or wrangler still starting). */
const NOT_YET = new Set(["ECONNREFUSED", "ECONNRESET"]);

/** The server's vars, once it answers: a server still migrating or starting is waited for. */
async function serverVars(server: DevServer): Promise<Record<string, string>> {
  const deadline = Date.now() + SERVER_WAIT_MS;
  for (;;) {
    try {
      const { status, body } = await gatewayCall(server, "/__operator/vars");
      if (status === 200) return body as Record<string, string>;
      throw new Error(
        `${describeServer(server)} refused its own operator token (${status}): what answers at ${server.url} is not that server; nothing was done`,
      );
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === undefined) throw error;
      // Any other failure to connect, a certificate not trusted among them, will not pass by waiting.
      if (!NOT_YET.has(code))
        throw new Error(`${describeServer(server)}: ${(error as Error).message} (${code}); nothing was done`);
      if (Date.now() > deadline)
        throw new Error(
          `${describeServer(server)} has not answered for ${SERVER_WAIT_MS / 1000} s: wait for it, or stop it; nothing was done`,
        );
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** A server reached, its vars read, and the wrangler environment it serves. */
interface Reached {
  server: DevServer;
  env: string | undefined;
  vars: Record<string, string>;
}

/**
 * The server a command works through, said with `say` and then asked for its vars: the one
 * `asked` names (its environment taken when no `env` is given), else the one serving `env`;
 * null when `asked` is undefined and none serves `env` (the local files then, said too). A
 * server that does not answer, or not as the one recorded, is refused before anything is done.
 */
async function reachServer(
  env: string | undefined,
  asked: ServerAsked | undefined,
  say: (line: string) => void,
): Promise<Reached | null> {
  const candidates = await serversFor(env, asked);
  if (candidates.length === 0) {
    say(onTheFiles(env));
    return null;
  }
  // Two records at one port: a second server that started there is still failing; the one
  // listening is the one whose token its gateway takes.
  let server = candidates[0] as DevServer;
  if (candidates.length > 1) {
    const answers = await Promise.all(
      candidates.map((candidate) => gatewayCall(candidate, "/__operator/vars").catch(() => null)),
    );
    server = candidates[answers.findIndex((answer) => answer?.status === 200)] ?? server;
  }
  say(`server: ${describeServer(server)}`);
  return { server, env: server.env ?? undefined, vars: await serverVars(server) };
}

/** A POST to the server's operator gateway (dev/dev-worker.ts): its result, or its error thrown. */
export async function operatorCall<T>(server: DevServer, path: string, body: object = {}): Promise<T> {
  const { status, body: answer } = await gatewayCall(server, path, body);
  const { result, error } = answer as { result?: T; error?: string };
  if (status !== 200) throw new Error(error ?? `operator gateway: ${status}`);
  return result as T;
}

function gatewayBackend(server: DevServer, binding: string): Backend {
  return {
    execute: (method, statements) =>
      operatorCall(server, "/__operator/d1", {
        binding,
        method,
        statements: statements.map(({ query, params }) => ({ sql: query, params })),
      }),
  };
}

export interface LocalProject {
  env: ConfigVars & { SHARDS: string } & Record<string, D1Database | string>;
  /** The wrangler environment worked on (undefined: the top level): the one asked, or the named server's. */
  wranglerEnv: string | undefined;
  /** The running `npm start` or `npm run demo` the databases are reached through, if any. */
  server: DevServer | null;
  close(): void;
}

/** The local vars `npm start` would read: wrangler.toml's, then `.dev.vars` overriding. */
function localVars(toml: WranglerEnv): ConfigVars & { SHARDS: string } {
  const devVars = path.join(ROOT, ".dev.vars");
  const vars = { ...toml.vars, ...(existsSync(devVars) ? parseEnv(readFileSync(devVars, "utf8")) : {}) };
  return vars as ConfigVars & { SHARDS: string };
}

/**
 * An operator command's run on the local project (`asked`: the server `--server` names): prints
 * what `act` answers as one JSON line, or the error's message alone and exit code 1; the
 * project is closed either way.
 */
export function answerOnLocalProject(
  env: string | undefined,
  asked: ServerAsked | undefined,
  act: (project: LocalProject) => Promise<unknown>,
): Promise<void> {
  return answerOn(() => openLocalProject(env, asked), act);
}

/** `answerOnLocalProject` on the databases `open` opens (the deployed ones: scripts/shards.ts). */
export async function answerOn<Project extends { close(): unknown }>(
  open: () => Promise<Project>,
  act: (project: Project) => Promise<unknown>,
): Promise<void> {
  let project: Project | undefined;
  try {
    project = await open();
    console.log(JSON.stringify(await act(project)));
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  } finally {
    await project?.close();
  }
}

/**
 * Every local D1 of the wrangler environment (`env` undefined: the top level) and its vars,
 * as `npm start` sees them. Through the operator gateway (dev/dev-worker.ts) of the server
 * `asked` names (of any environment, unless `env` is given), or else of the `npm start` or
 * `npm run demo` serving this environment, with the vars it runs with: the files are
 * workerd's then. Otherwise the files themselves, with wrangler.toml's vars (`.dev.vars`
 * overriding). Which one, `say` tells first (stderr by default). Migrations are applied
 * first, to every database, only when one of them is behind.
 */
export async function openLocalProject(
  env?: string,
  asked?: ServerAsked,
  say: (line: string) => void = toStderr,
): Promise<LocalProject> {
  // An environment wrangler.toml lacks is refused before anything else.
  if (env !== undefined) readWranglerToml(env);
  const reached = await reachServer(env, asked, say);
  if (reached) return projectThrough(reached);
  const toml = readWranglerToml(env);
  const databases = toml.d1_databases.map((database) => ({
    ...database,
    file: sqlitePath(database.database_id),
  }));
  if (databases.some(({ file, migrations_dir }) => isBehind(file, migrations_dir ?? "migrations"))) {
    execFileSync(
      process.execPath,
      [path.join(ROOT, "scripts", "shards.ts"), "migrate", "--local", ...(env === undefined ? [] : ["--env", env])],
      { cwd: ROOT, stdio: ["ignore", process.stderr, process.stderr], env: { ...process.env, [SAID_ENV]: "1" } },
    );
  }
  const opened: DatabaseSync[] = [];
  const bindings: Record<string, D1Database> = {};
  for (const { binding, file } of databases) {
    // Never create a database of our own: if wrangler keeps it elsewhere, say so.
    if (!existsSync(file)) throw new Error(`the local D1 for ${binding} is not at ${file}: update dev/local-d1.ts`);
    const db = new DatabaseSync(file);
    // A `wrangler dev` started without `npm start` may be writing: wait for its lock rather than fail.
    db.exec("PRAGMA busy_timeout = 5000");
    opened.push(db);
    bindings[binding] = localD1(fileBackend(db));
  }
  return {
    env: { ...localVars(toml), ...bindings },
    wranglerEnv: env,
    server: null,
    close: () => {
      for (const db of opened) db.close();
    },
  };
}

/** The project through a reached server's gateway, its databases migrated if behind. */
async function projectThrough({ server, env, vars }: Reached): Promise<LocalProject> {
  const toml = readWranglerToml(env);
  const bindings = Object.fromEntries(
    toml.d1_databases.map(({ binding }) => [binding, localD1(gatewayBackend(server, binding))]),
  );
  await migrateThrough(bindings, toml);
  return {
    env: { ...(vars as ConfigVars & { SHARDS: string }), ...bindings },
    wranglerEnv: env,
    server,
    close: () => {},
  };
}

/**
 * The project through `server`'s gateway, once it answers (a starting server is waited for):
 * for the server's own start (dev/demo.ts), which holds its record, found or not by the commands.
 */
export async function openThroughServer(server: DevServer): Promise<LocalProject> {
  const env = server.env ?? undefined;
  return projectThrough({ server, env, vars: await serverVars(server) });
}

// wrangler's own table of applied migrations, as `wrangler d1 migrations apply` creates it.
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS d1_migrations(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT UNIQUE,
  applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`;

/** Per binding, the migration files it has not applied yet, read through `bindings`. */
async function pendingMigrations(
  bindings: Record<string, D1Database>,
  toml: WranglerEnv,
): Promise<Map<string, string[]>> {
  // Every database at once: through a loaded server each read waits its turn, so they wait together.
  const pending = await Promise.all(
    toml.d1_databases.map(async ({ binding, migrations_dir = "migrations" }) => {
      const db = bindings[binding] as D1Database;
      const [, applied] = await db.batch<{ name: string }>([
        db.prepare(MIGRATIONS_TABLE),
        db.prepare("SELECT name FROM d1_migrations"),
      ]);
      const done = new Set(applied?.results.map((row) => row.name));
      const files = readdirSync(path.join(ROOT, migrations_dir)).filter((name) => name.endsWith(".sql"));
      return [binding, files.sort().filter((name) => !done.has(name))] as const;
    }),
  );
  return new Map(pending);
}

/**
 * Applies what is pending through `bindings` (the running server's D1): each migration file
 * and its d1_migrations row in one batch, so a migration is applied whole or not at all.
 * drizzle-kit separates a file's statements with `--> statement-breakpoint`.
 */
async function migrateThrough(bindings: Record<string, D1Database>, toml: WranglerEnv): Promise<string[]> {
  const applied: string[] = [];
  for (const [binding, names] of await pendingMigrations(bindings, toml)) {
    const db = bindings[binding] as D1Database;
    const dir = toml.d1_databases.find((database) => database.binding === binding)?.migrations_dir ?? "migrations";
    for (const name of names) {
      const sql = readFileSync(path.join(ROOT, dir, name), "utf8");
      const statements = sql
        .split("--> statement-breakpoint")
        .map((part) => part.trim())
        .filter(Boolean);
      await db.batch([
        ...statements.map((statement) => db.prepare(statement)),
        db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(name),
      ]);
      applied.push(`${binding} ${name}`);
    }
  }
  return applied;
}

/**
 * `db:migrate:local` and `db:status` through the gateway of the server `asked` names, or of the
 * `npm start` (or demo) serving `env`, said with `say`; null when none serves `env` and none was
 * named (the caller works on the files, and says so).
 */
export async function throughRunningServer(
  env: string | undefined,
  asked: ServerAsked | undefined,
  say: (line: string) => void = toStderr,
): Promise<{
  server: DevServer;
  env: string | undefined;
  migrate(): Promise<string[]>;
  pending(): Promise<Map<string, string[]>>;
} | null> {
  if (env !== undefined) readWranglerToml(env);
  const reached = await reachServer(env, asked, say);
  if (!reached) return null;
  const toml = readWranglerToml(reached.env);
  const bindings = Object.fromEntries(
    toml.d1_databases.map(({ binding }) => [binding, localD1(gatewayBackend(reached.server, binding))]),
  );
  return {
    server: reached.server,
    env: reached.env,
    migrate: () => migrateThrough(bindings, toml),
    pending: () => pendingMigrations(bindings, toml),
  };
}
