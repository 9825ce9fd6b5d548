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
import type { ConfigVars } from "../src/config.ts";

const ROOT = path.join(import.meta.dirname, "..");
const STATE = path.join(ROOT, ".wrangler", "state", "v3", "d1", "miniflare-D1DatabaseObject");

interface WranglerToml {
  vars: Record<string, string>;
  d1Databases: Record<string, string>[];
}

/** The parts of wrangler.toml read here: `[vars]` and `[[d1_databases]]`, string values only. */
function readWranglerToml(): WranglerToml {
  const parsed: WranglerToml = { vars: {}, d1Databases: [] };
  let table: Record<string, string> | null = null;
  for (const line of readFileSync(path.join(ROOT, "wrangler.toml"), "utf8").split("\n")) {
    const header = /^\s*(\[\[?[\w.]+\]\]?)\s*(#.*)?$/.exec(line)?.[1];
    if (header) {
      table = header === "[vars]" ? parsed.vars : header === "[[d1_databases]]" ? {} : null;
      if (header === "[[d1_databases]]" && table) parsed.d1Databases.push(table);
      continue;
    }
    const pair = /^\s*([\w-]+)\s*=\s*("(?:[^"\\]|\\.)*")\s*(#.*)?$/.exec(line);
    if (table && pair) table[pair[1] as string] = JSON.parse(pair[2] as string);
  }
  return parsed;
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
  env: ConfigVars & { DB: D1Database };
  close(): void;
}

/** The local D1 bound as `binding` in wrangler.toml and the vars (`.dev.vars` overriding), as `npm start` sees them. */
export function openLocalProject(binding = "DB"): LocalProject {
  const toml = readWranglerToml();
  const database = toml.d1Databases.find((entry) => entry.binding === binding);
  if (!database?.database_id) throw new Error(`wrangler.toml has no [[d1_databases]] with binding = "${binding}"`);
  const file = sqlitePath(database.database_id);
  if (isBehind(file, database.migrations_dir ?? "migrations")) {
    execFileSync(
      process.execPath,
      [
        path.join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js"),
        "d1",
        "migrations",
        "apply",
        binding,
        "--local",
      ],
      { cwd: ROOT, stdio: ["ignore", process.stderr, process.stderr] },
    );
  }
  // Never create a database of our own: if wrangler keeps it elsewhere, say so.
  if (!existsSync(file)) throw new Error(`the local D1 for ${binding} is not at ${file}: update scripts/local-d1.ts`);
  const devVars = path.join(ROOT, ".dev.vars");
  const vars = { ...toml.vars, ...(existsSync(devVars) ? parseEnv(readFileSync(devVars, "utf8")) : {}) };
  const db = new DatabaseSync(file);
  // wrangler dev may be writing at the same moment: wait for its lock rather than fail.
  db.exec("PRAGMA busy_timeout = 5000");
  const d1 = {
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
  };
  return { env: { ...(vars as ConfigVars), DB: d1 as unknown as D1Database }, close: () => db.close() };
}
