// Seeding (bench/bench.ts, phase 2): the rows `issueSession` writes, in bulk, for the cost
// phase's users, the load's users and the big table.
import { getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { sessionEvents, sessions } from "../src/db/schema.ts";
import { bucketOf } from "../src/db/shards.ts";
import type { SessionCarrier } from "../src/domain/carrier.ts";
import type { readConfig } from "../src/domain/config.ts";
import { DEFAULT_REGION, type Placement } from "../src/domain/token.ts";
import { buildSession } from "../src/services/issue-session.ts";

/** The table the costs are measured on again, and the load runs against: at least this many sessions. */
export const BIG_TABLE = 200_000;
/** Rows per INSERT when seeding (one JSON parameter of ~0.7 MB). */
const ROWS_PER_INSERT = 2000;
const USER_AGENTS = [
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
  "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
];

export interface Seeded {
  id: string;
  token: string;
  userId: string;
  /** The User-Agent it was issued with: its requests come from that browser, nothing changed (session context). */
  userAgent: string;
}

let users = 0;
/** Sessions built at once: the SHA-256 of each secret is async, so they overlap. */
const BUILD_CONCURRENCY = 1000;

/**
 * Issues `size` sessions to each of `count` new users; returns each user's sessions. A browser's
 * sessions (`cookie`, judged by their context) unless `carrier` says an app's (`bearer`).
 */
export async function seedUsers(
  d1: D1Database,
  config: ReturnType<typeof readConfig>,
  count: number,
  size: number,
  carrier: SessionCarrier = "cookie",
) {
  const userIds = Array.from({ length: count }, (_, u) => `bench-user-${users + u + 1}`);
  // The bench runs the default configuration, one database: every user is placed on it.
  // One placement per user, not per session (200,000 digests made seeding seconds slower).
  const placements = await Promise.all(
    userIds.map(async (userId) => ({ region: DEFAULT_REGION, bucket: await bucketOf(userId) })),
  );
  const inputs = Array.from({ length: count * size }, (_, i) => ({
    userId: userIds[Math.floor(i / size)] as string,
    ipAddress: `198.51.100.${(i % 250) + 1}`,
    userAgent: USER_AGENTS[i % USER_AGENTS.length] as string,
    country: "DE",
    city: "Berlin",
    // A browser's session, as a login worker issues it: its cookie is judged by its context.
    carrier,
  }));
  users += count;
  const built: Awaited<ReturnType<typeof buildSession>>[] = [];
  for (let i = 0; i < inputs.length; i += BUILD_CONCURRENCY) {
    built.push(
      ...(await Promise.all(
        inputs
          .slice(i, i + BUILD_CONCURRENCY)
          .map((input, j) => buildSession(config, input, placements[Math.floor((i + j) / size)] as Placement)),
      )),
    );
  }
  await insertInBulk(
    d1,
    built.map((session) => session.row),
  );
  return Array.from({ length: count }, (_, u) =>
    built
      .slice(u * size, (u + 1) * size)
      .map(({ row, issued }) => ({ id: issued.id, token: issued.token, userId: row.userId, userAgent: row.userAgent })),
  );
}

/**
 * Inserts the sessions and their `created` events (what insertSession writes for a session
 * issued over RPC) a few thousand rows per statement: the rows travel as one JSON parameter
 * and SQLite's json_each unpacks them, ~40x faster here than drizzle's multi-row INSERTs,
 * which D1's limit of 100 bound parameters keeps to 7 sessions each.
 */
async function insertInBulk(d1: D1Database, rows: (typeof sessions.$inferInsert)[]): Promise<void> {
  const events = rows.map((row) => ({
    userId: row.userId,
    type: "created" as const,
    sessionId: row.id,
    actorSessionId: null,
    ipAddress: row.ipAddress ?? null,
    createdAt: row.createdAt,
    requestId: crypto.randomUUID(),
    deviceKey: row.deviceKey,
  }));
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    await d1.batch([
      jsonInsert(d1, sessions, rows.slice(i, i + ROWS_PER_INSERT)),
      jsonInsert(d1, sessionEvents, events.slice(i, i + ROWS_PER_INSERT)),
    ]);
  }
}

/** `INSERT INTO <table> (<columns of the rows>) SELECT ... FROM json_each(?)`, columns and encodings from the schema. */
function jsonInsert(d1: D1Database, table: SQLiteTable, rows: Record<string, unknown>[]): D1PreparedStatement {
  const columns = Object.entries(getTableColumns(table)).filter(([key]) => key in (rows[0] ?? {}));
  const names = columns.map(([, column]) => `"${column.name}"`).join(", ");
  const values = columns.map((_, i) => `value->>${i}`).join(", ");
  const data = rows.map((row) =>
    columns.map(([key, column]) => (row[key] == null ? null : column.mapToDriverValue(row[key]))),
  );
  return d1
    .prepare(`INSERT INTO "${getTableName(table)}" (${names}) SELECT ${values} FROM json_each(?)`)
    .bind(JSON.stringify(data));
}

/** A request of the browser that holds the session: its cookie and User-Agent. */
export const browser = ({ token, userAgent }: Seeded) => ({
  cookie: `__Host-session=${token}`,
  "user-agent": userAgent,
});

/** A request of an app that holds the session (issued `bearer`): its token as Bearer, never judged. */
export const app = ({ token, userAgent }: Seeded) => ({
  authorization: `Bearer ${token}`,
  "user-agent": userAgent,
});
