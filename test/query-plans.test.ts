import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../src/db/client.ts";
import { listEvents } from "../src/db/events.ts";
import { insertSession } from "../src/db/issuing.ts";
import { actOnOrganizationSessions, listOrganizationSessionsOn } from "../src/db/organizations/sessions.ts";
import { markDelivered, pendingEvents } from "../src/db/outbox.ts";
import { purgeEvents, purgeSessions } from "../src/db/purge.ts";
import { confirmReport, readReport } from "../src/db/report.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  endSessionById,
  endSessionByToken,
  endSessionsByUserId,
  listSessionsByToken,
  listSessionsByUserId,
} from "../src/db/sessions.ts";
import { type BucketShard, readShardMap } from "../src/db/shards.ts";
import { actOnSessionsForSet } from "../src/db/upstreams/inbound-sets.ts";
import { instant } from "../src/domain/clock.ts";
import { moveBuckets } from "../src/services/moves.ts";
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

const at = instant({ idleTimeoutSeconds: 1_209_600, slidingTtl: false, maxLifetimeSeconds: 34_560_000 });
const sliding = instant({ idleTimeoutSeconds: 1_209_600, slidingTtl: true, maxLifetimeSeconds: 34_560_000 });
const proof = { id: "A".repeat(24), secretHash: "0".repeat(64), carrier: "cookie", member: false } as const;
const member = { ...proof, member: true };
const writer = { sessionId: proof.id, ipAddress: "192.0.2.1", queued: false, published: false, adminKeyId: null };
// A context check with every rule on (src/db/client-context.ts): its statements are planned too.
const check = {
  context: { browser: "Chrome", os: "macOS", country: "DE", asn: 3320, latitude: 50.1109, longitude: 8.6821 },
  policies: { device: "hold", network: "end", travel: "log" },
  travel: { maxKmh: 1000, minKm: 2000 },
  logOnly: false,
} as const;
const newSession = (id: string) => ({
  id,
  secretHash: "0".repeat(64),
  userId: "plan-user",
  userAgent: "",
  deviceType: "unknown" as const,
  createdAt: at.now,
  expiresAt: new Date(at.now.getTime() + 60_000),
  lastActiveAt: at.now,
  ttlSeconds: 60,
  deviceKey: "||",
  authenticatedAt: at.now,
  reportHash: "1".repeat(64),
});

/** A bucket of the first database, as the worker's routes get it (src/db/shards.ts). */
const on = (db: Database): BucketShard => ({ binding: "DB", db, bucket: "AA", elsewhere: () => null });

/** An organization's id, as the statements bind it. */
const ORGANIZATION = `org_${"A".repeat(22)}`;

const operations: Record<string, (db: Database) => Promise<unknown>> = {
  authenticate: (db) => authenticate(on(db), proof, at, check, writer),
  "authenticate (sliding)": (db) => authenticate(on(db), proof, sliding, check, writer),
  // A member's: its organization's sliding, step-up and context policies are read where no var has them.
  "authenticate (a member's)": (db) => authenticate(on(db), member, at, check, writer),
  "endOtherSessionsByToken (a member's)": (db) => endOtherSessionsByToken(on(db), member, writer, at, check),
  insertSession: (db) =>
    insertSession(on(db), newSession(`AA${"C".repeat(22)}`), writer, { maxPerUser: 2, seenSince: at.now }, at),
  // A member's: its organization's policy row required by the INSERT, and read by every liveness rule.
  "insertSession (a member's)": (db) =>
    insertSession(
      on(db),
      { ...newSession(`AA${"D".repeat(22)}`), organizationId: `org_${"o".repeat(22)}` },
      writer,
      { maxPerUser: 2, seenSince: at.now },
      sliding,
    ),
  listSessionsByUserId: (db) => listSessionsByUserId(on(db), "plan-user", at),
  endSessionsByUserId: (db) => endSessionsByUserId(on(db), "plan-user", proof.id, "admin", writer, at),
  endSessionById: (db) => endSessionById(on(db), proof.id, "admin", writer, at),
  pendingEvents: (db) => pendingEvents(db, at.now, 10),
  markDelivered: (db) => markDelivered(db, [1, 2, 3]),
  listSessionsByToken: (db) => listSessionsByToken(on(db), proof, at, check, writer),
  deleteSession: (db) => deleteSession(on(db), proof, `AA${"B".repeat(22)}`, writer, at, check),
  endSessionByToken: (db) => endSessionByToken(on(db), proof, writer, at),
  endAllSessionsByToken: (db) => endAllSessionsByToken(on(db), proof, writer, at, check),
  endOtherSessionsByToken: (db) => endOtherSessionsByToken(on(db), proof, writer, at, check),
  listEvents: (db) => listEvents(on(db), proof, at, check, writer),
  purgeSessions: (db) => purgeSessions(db, at, 10),
  purgeEvents: (db) => purgeEvents(db, at.now, 10),
  readReport: (db) => readReport(on(db), proof, at.now, at),
  confirmReport: (db) => confirmReport(on(db), proof, at.now, writer, at),
  // A SET whose session member is an upstream's `sid`, not one of this service's ids: the
  // user's index, then the upstream's columns (and whether the user has a session through it).
  "actOnSessionsForSet (an upstream's sid)": (db) =>
    actOnSessionsForSet(
      on(db),
      { issuer: "https://idp.example", jti: "j1" },
      { userId: "plan-user", sessionId: null, upstreamSid: { upstream: "idp", sid: "s1" }, issuedAt: at.now },
      "end",
      "idp:session-revoked",
      writer,
      at,
    ),
  "actOnSessionsForSet (this service's id or the upstream's sid, held)": (db) =>
    actOnSessionsForSet(
      on(db),
      { issuer: "https://idp.example", jti: "j2" },
      {
        userId: "plan-user",
        sessionId: proof.id,
        upstreamSid: { upstream: "idp", sid: proof.id },
        upstream: { name: "idp", subject: "sub-1", sid: null },
        issuedAt: at.now,
        heldSince: at.now,
      },
      "hold",
      "idp:credential-change",
      writer,
      at,
    ),
  "actOnOrganizationSessions (end)": (db) =>
    actOnOrganizationSessions(on(db), ORGANIZATION, "end", "admin", writer, at),
  "actOnOrganizationSessions (hold)": (db) =>
    actOnOrganizationSessions(on(db), ORGANIZATION, "hold", "admin", writer, at),
  listOrganizationSessionsOn: (db) => listOrganizationSessionsOn(on(db), ORGANIZATION, `AA${"B".repeat(22)}`, 51, at),
};

describe("query plans", () => {
  for (const [name, run] of Object.entries(operations)) {
    it(`${name}: no table scans`, async () => {
      const { db, statements } = recordingD1(database);
      await run(openDatabase(db));
      expect(statements.length).toBeGreaterThan(0);
      for (const { sql, params } of statements) {
        const detail = await plan(sql, params);
        expect({ sql, detail }).not.toMatchObject({
          detail: expect.stringMatching(/SCAN (sessions|session_events|organization_policies)(?! USING)/),
        });
      }
    });
  }

  it("a write reads its own events back by id (the table is in time order), as does create's once-only check", async () => {
    // endSessionByToken: the read-back; insertSession: the once-only checks of the row and of its event, and the read-back.
    for (const [run, expected] of [
      [operations.endSessionByToken!, 1],
      [operations.insertSession!, 3],
    ] as const) {
      const { db, statements } = recordingD1(database);
      await run(openDatabase(db));
      const reads = statements.filter((s) => /"request_id" = \?/.test(s.sql));
      expect(reads.length).toBe(expected);
      for (const read of reads) {
        expect(await plan(read.sql, read.params)).toMatch(
          /SEARCH session_events USING INTEGER PRIMARY KEY \(rowid>\?\)/,
        );
      }
    }
  });

  it("the context event's INSERT returns its rows only when an outbox sends them", async () => {
    for (const [published, returning] of [
      [false, false],
      [true, true],
    ] as const) {
      const { db, statements } = recordingD1(database);
      await authenticate(on(openDatabase(db)), proof, at, check, { ...writer, published });
      const insert = statements.find((s) => s.sql.startsWith('insert into "session_events"'))!;
      expect({ published, returning: / returning "id", /.test(insert.sql) }).toEqual({ published, returning });
    }
  });

  it("an organization's chunk, its moving count and its page read its rows by the organization's index, in id order", async () => {
    for (const run of [
      (db: Database) => actOnOrganizationSessions(on(db), ORGANIZATION, "hold", "admin", writer, at),
      (db: Database) => listOrganizationSessionsOn(on(db), ORGANIZATION, null, 51, at),
    ]) {
      const { db, statements } = recordingD1(database);
      await run(openDatabase(db));
      const details = await Promise.all(
        statements.filter((s) => /"sessions"."organization_id" = \?/.test(s.sql)).map((s) => plan(s.sql, s.params)),
      );
      expect(details.length).toBeGreaterThan(0);
      for (const detail of details) {
        expect(detail).toMatch(/SEARCH sessions USING INDEX sessions_organization_id_idx \(organization_id=\?/);
        expect(detail).not.toMatch(/USE TEMP B-TREE FOR ORDER BY/);
      }
    }
  });

  it("a SET naming an upstream's sid finds the user's sessions by the user index", async () => {
    const { db, statements } = recordingD1(database);
    await operations["actOnSessionsForSet (an upstream's sid)"]!(openDatabase(db));
    const ending = statements.find((s) => s.sql.startsWith('delete from "sessions"'))!;
    const detail = await plan(ending.sql, ending.params);
    expect(detail).toMatch(
      /SEARCH sessions USING INDEX sessions_user_id_expires_at_idx \(user_id=\? AND expires_at>\?\)/,
    );
  });

  it("a member's policy is read by its organization's primary key, in the statement that judges the session", async () => {
    // A session outside any organization reads no policy in its own statements (one outside's authenticate: none).
    const outside = recordingD1(database);
    await operations.authenticate!(openDatabase(outside.db));
    expect(outside.statements.filter((s) => s.sql.includes("organization_policies"))).toEqual([]);
    for (const run of [operations["authenticate (a member's)"]!, operations.listSessionsByUserId!]) {
      const { db, statements } = recordingD1(database);
      await run(openDatabase(db));
      const details = await Promise.all(statements.map((s) => plan(s.sql, s.params)));
      const policies = details.join("\n").match(/^.*organization_policies.*$/gm) ?? [];
      expect(policies.length).toBeGreaterThan(0);
      for (const line of policies)
        expect(line).toMatch(
          /SEARCH organization_policies USING INDEX sqlite_autoindex_organization_policies_1 \(organization_id=\?\)/,
        );
    }
  });

  it("the list reads the caller by primary key and the user's sessions by the user index", async () => {
    const { db, statements } = recordingD1(database);
    await listSessionsByToken(on(openDatabase(db)), proof, at, check, writer);
    const select = statements.find((s) => s.sql.includes("group_concat"))!;
    const detail = await plan(select.sql, select.params);
    expect(detail).toMatch(
      /SEARCH sessions USING INDEX sessions_user_id_expires_at_idx \(user_id=\? AND expires_at>\?\)/,
    );
    expect(detail).toMatch(/SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 \(id=\?\)/);
  });

  it("the security log and the new-device check read the user's events under its bucket; the purges seek", async () => {
    const details: Record<string, string> = {};
    for (const name of ["listEvents", "insertSession", "purgeEvents", "purgeSessions"]) {
      const { db, statements } = recordingD1(database);
      await operations[name]!(openDatabase(db));
      details[name] = (await Promise.all(statements.map((s) => plan(s.sql, s.params)))).join("\n");
    }
    const userEvents =
      /SEARCH session_events USING INDEX session_events_bucket_user_id_created_at_idx \(bucket=\? AND user_id=\?( AND created_at>\?)?\)/;
    expect(details.listEvents).toMatch(userEvents);
    expect(details.insertSession).toMatch(userEvents);
    expect(details.purgeEvents).toMatch(/SEARCH session_events USING INTEGER PRIMARY KEY \(rowid<\?\)/);
    expect(details.purgeSessions).toMatch(/SEARCH sessions USING INDEX sessions_expires_at_idx \(expires_at<\?\)/);
  });

  it("a report token's events: its created event by the partial report index, then its user's by the main index", async () => {
    for (const name of ["readReport", "confirmReport"]) {
      const { db, statements } = recordingD1(database);
      await operations[name]!(openDatabase(db));
      const history = statements.find((s) => s.sql.includes('"created"'))!;
      const detail = await plan(history.sql, history.params);
      expect(detail).toMatch(/SEARCH created USING INDEX session_events_report_idx \(session_id=\?\)/);
      expect(detail).toMatch(
        /SEARCH session_events USING INDEX session_events_bucket_user_id_created_at_idx \(bucket=\? AND user_id=\? AND created_at>\?\)/,
      );
    }
  });

  it.skipIf(shardBindings().length < 2)(
    "a move finds a bucket's sessions by primary key and its events by the bucket index",
    async () => {
      const recordings: ReturnType<typeof recordingD1>[] = [];
      const open = (binding: string) => {
        const recording = recordingD1(d1(binding));
        recordings.push(recording);
        return openDatabase(recording.db);
      };
      const move = { map: readShardMap(env), region: "default", first: 1000, last: 1000, to: "DB_1" };
      await moveBuckets(move, { open, now: () => new Date() });
      const details = [];
      const statements = recordings.flatMap((recording) => recording.statements);
      for (const { sql, params } of statements.filter((s) => /session/.test(s.sql))) {
        const detail = await plan(sql, params);
        details.push(detail);
        expect({ sql, detail }).not.toMatchObject({
          detail: expect.stringMatching(/SCAN (sessions|session_events)(?! USING)/),
        });
      }
      expect(details.join("\n")).toMatch(/SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 \(id>\? AND id<\?\)/);
      expect(details.join("\n")).toMatch(
        /SEARCH session_events USING INDEX session_events_bucket_user_id_created_at_idx \(bucket=\?\)/,
      );
    },
  );
});
