import { and, asc, eq, exists, gt, inArray, type SQL, sql } from "drizzle-orm";
import type { Instant } from "../../domain/clock.ts";
import { notMoving } from "../buckets.ts";
import { batchNamed, type Database } from "../client.ts";
import { isLive } from "../liveness.ts";
import { bucketMoves, organizationPolicies, sessions } from "../schema.ts";
import { BACKEND_SESSION_VIEW } from "../session-view.ts";
import type { Shard } from "../shards.ts";
import { endSessions, type Logged, loggedBy, newWrite, recordEvents, type Writer } from "../writes.ts";

// An organization's sessions on one database, all users and buckets at once, through the
// partial index sessions_organization_id_idx (organization_id, id): each operation is one
// batch, so one round trip per database, and reads the organization's policy row in it, which
// every database holds for every organization (src/db/schema.ts): none, no such organization.

/**
 * Rows one batch ends or holds on one database, at most. The outbox then sends the batch's
 * events as one part, as large as the cron's (src/services/resend.ts RESEND_BATCH_SIZE): one
 * queue batch, one round trip to queue their SETs, one to mark them delivered.
 */
export const ORGANIZATION_CHUNK = 100;

/** The organization's policy row is on this database: the organization exists. */
function knownOn(db: Database, organizationId: string): SQL {
  return exists(
    db
      .select({ one: sql`1` })
      .from(organizationPolicies)
      .where(eq(organizationPolicies.organizationId, organizationId)),
  );
}

/** What an organization-wide act reaches: its members' live sessions, unheld ones for a hold. */
function members(organizationId: string, at: Instant, unheld: boolean): SQL {
  return and(
    eq(sessions.organizationId, organizationId),
    isLive(at),
    unheld ? eq(sessions.held, false) : undefined,
  ) as SQL;
}

/** What one database's act on an organization answers. */
export interface OrganizationAct {
  /** The organization's policy row is on this database. */
  known: boolean;
  /** Sessions ended or held by this batch (either attempt of it). */
  changed: number;
  /** Sessions it would reach that sit in a bucket being moved, which no write touches: ask again after the move. */
  moving: number;
}

/**
 * Ends (logged `ended`) or holds until the user signs in again (logged `held`, as a context
 * change's hold: `reauthenticate` lifts it) the first ORGANIZATION_CHUNK of the organization's
 * sessions on this database, by id, in one batch: the events, then the DELETE or UPDATE, of
 * the same rows (the chunk is chosen again by each statement, of an unchanged table). A hold
 * passes over a session held already. Nothing changes when the organization does not exist.
 * A replayed batch whose first attempt committed (src/db/writes.ts) acts on the next chunk too,
 * and answers both: twice the chunk at most, and a harmless `complete: false`.
 */
export async function actOnOrganizationSessions(
  { db }: Shard,
  organizationId: string,
  act: "end" | "hold",
  reason: string,
  writer: Writer,
  at: Instant,
): Promise<Logged<OrganizationAct>> {
  const write = newWrite(at.now);
  const reached = members(organizationId, at, act === "hold");
  const chunk = db
    .select({ id: sessions.id })
    .from(sessions)
    .where(and(reached, notMoving(), knownOn(db, organizationId)))
    .orderBy(asc(sessions.id))
    .limit(ORGANIZATION_CHUNK);
  const matching = inArray(sessions.id, chunk);
  // Counted only while a move is under way on this database: otherwise no row is read for it.
  const moving = sql<number>`CASE WHEN EXISTS (SELECT 1 FROM ${bucketMoves}) THEN (SELECT count(*) FROM ${sessions} WHERE ${reached} AND NOT ${notMoving()}) ELSE 0 END`;
  const { logged, state } = await batchNamed(db, {
    recorded: recordEvents(db, act === "end" ? "ended" : "held", matching, writer, write, { reason }),
    ended: act === "end" ? endSessions(db, matching) : null,
    held: act === "hold" ? db.update(sessions).set({ held: true }).where(and(matching, notMoving())) : null,
    logged: loggedBy(db, write),
    state: db
      .select({
        known: sql<number>`${knownOn(db, organizationId)}`.mapWith(Boolean).as("known"),
        moving: moving.mapWith(Number).as("moving"),
      })
      .from(sql`(SELECT 1)`),
  });
  const row = state[0];
  return {
    answer: { known: row?.known ?? false, changed: logged.length, moving: row?.moving ?? 0 },
    events: logged,
    db,
  };
}

/** One page of the organization's live sessions on one database, and whether it exists. */
export interface OrganizationPage {
  known: boolean;
  /** At most the limit asked, by id, each as the admin list renders it (JSON text) with its user. */
  sessions: { id: string; view: string }[];
}

/**
 * A listed session as a backend sees it, with its user, and `held` only when it is (a patch's
 * null member adds nothing).
 */
const ORGANIZATION_SESSION_VIEW = sql<string>`json_patch(${BACKEND_SESSION_VIEW}, json_object('user_id', ${sessions.userId}, 'held', CASE WHEN ${sessions.held} THEN json('true') END))`;

/**
 * The organization's live sessions with an id after `after` (null: from the first), by id, at
 * most `limit`, in one batch with its policy row: one round trip.
 */
export async function listOrganizationSessionsOn(
  { db }: Shard,
  organizationId: string,
  after: string | null,
  limit: number,
  at: Instant,
): Promise<OrganizationPage> {
  const { known, listed } = await batchNamed(db, {
    known: db
      .select({ one: sql`1` })
      .from(organizationPolicies)
      .where(eq(organizationPolicies.organizationId, organizationId)),
    listed: db
      .select({ id: sessions.id, view: ORGANIZATION_SESSION_VIEW.as("view") })
      .from(sessions)
      .where(and(members(organizationId, at, false), after === null ? undefined : gt(sessions.id, after)))
      .orderBy(asc(sessions.id))
      .limit(limit),
  });
  return { known: known.length > 0, sessions: listed };
}
