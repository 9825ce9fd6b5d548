import { describe, expect, it } from "vitest";
import { instant } from "../src/clock.ts";
import * as queries from "../src/db/queries.ts";
import { recordingD1 } from "./d1.ts";
import { d1, shardBindings } from "./helpers.ts";

// The statements are the same on every database; any one will do.
const database = d1(shardBindings()[0] as string);

// Unit tests of the statements themselves: every statement of every operation must find
// its rows through an index, never by scanning a table.

async function plan(sql: string, params: unknown[]): Promise<string> {
  const { results } = await database
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...params)
    .all<{ detail: string }>();
  return results.map((row) => row.detail).join("\n");
}

const at = instant({ idleTimeoutSeconds: 1_209_600 });
const proof = { id: "AAAAAAAAAAAAAAAAAAAAAA", secretHash: "0".repeat(64) };
const actor = { sessionId: proof.id, ipAddress: "192.0.2.1" };

const operations: Record<string, (db: queries.Database) => Promise<unknown>> = {
  authenticate: (db) => queries.authenticate(db, proof, at),
  listSessions: (db) => queries.listSessions(db, proof, at),
  deleteSession: (db) => queries.deleteSession(db, proof, "BBBBBBBBBBBBBBBBBBBBBB", actor, at),
  endSession: (db) => queries.endSession(db, proof, actor, at),
  endAllSessions: (db) => queries.endAllSessions(db, proof, actor, at),
  endOtherSessions: (db) => queries.endOtherSessions(db, proof, actor, at),
  listEvents: (db) => queries.listEvents(db, proof, at),
  purgeSessions: (db) => queries.purgeSessions(db, at, 10),
  purgeEvents: (db) => queries.purgeEvents(db, at.now, 10),
};

describe("query plans", () => {
  for (const [name, run] of Object.entries(operations)) {
    it(`${name}: no table scans`, async () => {
      const { db, statements } = recordingD1(database);
      await run(queries.openDatabase(db));
      expect(statements.length).toBeGreaterThan(0);
      for (const { sql, params } of statements) {
        const detail = await plan(sql, params);
        expect({ sql, detail }).not.toMatchObject({
          detail: expect.stringMatching(/SCAN (sessions|session_events)(?! USING)/),
        });
      }
    });
  }

  it("the list reads the caller by primary key and the user's sessions by the user index", async () => {
    const { db, statements } = recordingD1(database);
    await queries.listSessions(queries.openDatabase(db), proof, at);
    const select = statements.find((s) => s.sql.startsWith("select"))!;
    const detail = await plan(select.sql, select.params);
    expect(detail).toMatch(
      /SEARCH sessions USING INDEX sessions_user_id_expires_at_idx \(user_id=\? AND expires_at>\?\)/,
    );
    expect(detail).toMatch(/SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 \(id=\?\)/);
  });
});
