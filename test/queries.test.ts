import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { listSessions, openDatabase } from "../src/db/queries.ts";

// Unit tests of the statements themselves: the hot lookups must be index searches.

async function plan(sql: string, params: unknown[]): Promise<string> {
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...params)
    .all<{ detail: string }>();
  return results.map((row) => row.detail).join("\n");
}

describe("query plans", () => {
  it("the list finds the caller by primary key and the user's sessions by index", async () => {
    const query = listSessions(openDatabase(env.DB), { id: "x", secretHash: "y" }, new Date()).toSQL();
    const detail = await plan(query.sql, query.params);
    expect(detail).toContain("USING INDEX sessions_user_id_expires_at_idx (user_id=? AND expires_at>?)");
    expect(detail).toMatch(/SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 \(id=\?\)/);
    expect(detail).not.toMatch(/SCAN sessions/);
  });

  it("the purge walks the expiry index", async () => {
    const detail = await plan("SELECT id FROM sessions WHERE expires_at <= ? ORDER BY expires_at LIMIT 10", [0]);
    expect(detail).toContain("sessions_expires_at_idx");
    expect(detail).not.toMatch(/SCAN sessions(?! USING)/);
  });
});
