// Opens the local D1 that `npm start` (wrangler dev) serves, for the operator commands, in
// tens of milliseconds: the SQLite file wrangler keeps under .wrangler/state, opened with
// node:sqlite behind the few D1 methods Drizzle's D1 driver calls. Importing wrangler (for
// getPlatformProxy) alone takes over a second, which is why this file exists.
// Migrations are applied (by wrangler, output on stderr) only when the file is behind.
import { execFileSync } from "node:child_process";
import { createHash, createHmac } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { parseEnv } from "node:util";
import { parse } from "smol-toml";
import type { ConfigVars } from "../src/config.ts";

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

/** The D1 statement methods Drizzle's D1 driver uses, over one node:sqlite statement. */
class LocalStatement {
  private readonly db: DatabaseSync;
  private readonly query: string;
  private readonly params: unknown[];

  constructor(db: DatabaseSync, query: string, params: unknown[] = []) {
    this.db = db;
    this.query = query;
    this.params = params;
  }

  bind(...params: unknown[]): LocalStatement {
    return new LocalStatement(this.db, this.query, params);
  }

  private prepared(arrays = false): StatementSync {
    const statement = this.db.prepare(this.query);
    statement.setReturnArrays(arrays);
    return statement;
  }

  allNow(): { results: Row[]; success: true; meta: Record<string, never> } {
    return { results: this.prepared().all(...(this.params as never[])) as Row[], success: true, meta: {} };
  }

  async all() {
    return this.allNow();
  }

  async first(column?: string) {
    const row = this.prepared().get(...(this.params as never[])) as Row | undefined;
    return row === undefined ? null : column === undefined ? row : row[column];
  }

  async raw() {
    return this.prepared(true).all(...(this.params as never[]));
  }

  async run() {
    const { changes, lastInsertRowid } = this.prepared().run(...(this.params as never[]));
    return { results: [], success: true, meta: { changes: Number(changes), last_row_id: Number(lastInsertRowid) } };
  }
}

export interface LocalProject {
  env: ConfigVars & { SHARDS: string } & Record<string, D1Database | string>;
  close(): void;
}

/** A D1 binding over one local SQLite file: the statement methods above, and a batch. */
function localD1(db: DatabaseSync): D1Database {
  return {
    prepare: (query: string) => new LocalStatement(db, query),
    // A D1 batch is one transaction; so is this.
    async batch(statements: LocalStatement[]) {
      db.exec("BEGIN IMMEDIATE");
      try {
        const results = statements.map((statement) => statement.allNow());
        db.exec("COMMIT");
        return results;
      } catch (error) {
        db.exec("ROLLBACK");
        throw error;
      }
    },
  } as unknown as D1Database;
}

/**
 * Every local D1 of the wrangler environment (`env` undefined: the top level) and its vars
 * (`.dev.vars` overriding), as `npm start` sees them. Migrations are applied first, to every
 * database, only when one of them is behind.
 */
export function openLocalProject(env?: string): LocalProject {
  const toml = readWranglerToml(env);
  const databases = toml.d1_databases.map((database) => ({
    ...database,
    file: sqlitePath(database.database_id),
  }));
  if (databases.some(({ file, migrations_dir }) => isBehind(file, migrations_dir ?? "migrations"))) {
    execFileSync(
      process.execPath,
      [path.join(ROOT, "scripts", "shards.ts"), "migrate", "--local", ...(env === undefined ? [] : ["--env", env])],
      { cwd: ROOT, stdio: ["ignore", process.stderr, process.stderr] },
    );
  }
  const devVars = path.join(ROOT, ".dev.vars");
  const vars = { ...toml.vars, ...(existsSync(devVars) ? parseEnv(readFileSync(devVars, "utf8")) : {}) };
  const opened: DatabaseSync[] = [];
  const bindings: Record<string, D1Database> = {};
  for (const { binding, file } of databases) {
    // Never create a database of our own: if wrangler keeps it elsewhere, say so.
    if (!existsSync(file)) throw new Error(`the local D1 for ${binding} is not at ${file}: update scripts/local-d1.ts`);
    const db = new DatabaseSync(file);
    // wrangler dev may be writing at the same moment: wait for its lock rather than fail.
    db.exec("PRAGMA busy_timeout = 5000");
    opened.push(db);
    bindings[binding] = localD1(db);
  }
  return {
    env: { ...(vars as ConfigVars & { SHARDS: string }), ...bindings },
    close: () => {
      for (const db of opened) db.close();
    },
  };
}
