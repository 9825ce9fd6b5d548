import { and, eq, getTableColumns, gt, gte, inArray, lt, sql } from "drizzle-orm";
import { BUCKET_COUNT, bucketKey, placementOf, RANDOM_LENGTH } from "../domain/token.ts";
import { batchAll, batchNamed, chunks, type Database } from "./client.ts";
import { type BucketMoveRow, bucketMoves, sessionEvents, sessions, ssfReceivedSets } from "./schema.ts";
import { bindingOf, formatShardMap, type ShardMap } from "./shards.ts";

// Moving buckets of users from one D1 database to another while the service answers
// (`npm run shards:move`, scripts/shards.ts; why it is safe: ARCHITECTURE.md, "Moving a
// bucket"). Each bucket in four steps of its own, each one batch on one database (a bucket of
// more than a page of rows: a few), each safe to run again:
//
//   freeze  source: bucket_moves row (bucket, frozen, target). From this commit on, no
//           request writes the bucket there (src/db/buckets.ts guards every write); reads
//           still answer from it. The same batch reads the bucket's rows as it leaves them.
//   copy    target: row (bucket, moved, source), so that a request reaching the target
//           early is sent back to the source, and nothing there can change the bucket's
//           rows; what an interrupted copy left there is cleared, and the bucket's sessions,
//           events and inbound SETs read from the (frozen, so unchanging) source are written.
//           Events get new row ids; every other field is kept.
//   switch  source: the row becomes (moved, target) and the bucket's sessions, events and
//           inbound SETs are deleted. Requests now follow the row to the target.
//   open    target: its row goes; the target answers for the bucket.
//
// What a database holds says how far a bucket got, so an interrupted move is finished by
// running it again. Until SHARDS names the target, requests for the bucket reach the
// source first and follow its `moved` row (one more round trip); `finishMoves` drops those
// rows once SHARDS is deployed.

export type MoveStep = "freeze" | "copy" | "switch" | "open";

export class MoveRefused extends Error {
  override name = "MoveRefused";
}

export interface MovePlan {
  /** The SHARDS in force: where requests go first. */
  map: ShardMap;
  region: string;
  first: number;
  last: number;
  /** The binding the buckets go to; a database of this region or a new one. */
  to: string;
}

export interface MoveTools {
  /** Any D1 binding of the environment, SHARDS or not; throws if there is none by that name. */
  open(binding: string): Database;
  now(): Date;
  /** Called after each step; an exception stops the move there (tests interrupt it this way). */
  afterStep?(bucket: number, step: MoveStep): void | Promise<void>;
}

export interface MoveReport {
  /** Buckets moved by this run, and buckets found already on the target. */
  moved: number;
  alreadyThere: number;
  sessions: number;
  events: number;
  /** The SHARDS value that names the target for the range: what is left to deploy. */
  shards: string;
}

/** A move follows `moved` rows this many times at most (a move of a move, before SHARDS caught up). */
const MAX_HOPS = 8;
/**
 * Buckets moved at once, each through its own steps: a bucket's rows and move rows are its
 * own, so their moves do not meet, and their round trips wait in each database's queue
 * together rather than one after another.
 */
const BUCKETS_AT_ONCE = 64;
/** Rows read from the source per round trip. */
const PAGE = 500;
// D1 binds at most 100 values per statement: one per column of each row (events without their
// id and their computed bucket).
const SESSION_ROWS_PER_INSERT = Math.floor(100 / Object.keys(getTableColumns(sessions)).length);
const EVENT_ROWS_PER_INSERT = Math.floor(100 / (Object.keys(getTableColumns(sessionEvents)).length - 2));
const INBOUND_ROWS_PER_INSERT = Math.floor(100 / Object.keys(getTableColumns(ssfReceivedSets)).length);

/** The bucket's sessions by id: ids start with the key, and `~` sorts after every base64url character. */
function inBucket(key: string) {
  return and(
    gte(sessions.id, key),
    lt(sessions.id, `${key}~`),
    sql`length(${sessions.id}) = ${key.length + RANDOM_LENGTH}`,
  );
}

async function markerOf(db: Database, key: string): Promise<BucketMoveRow | undefined> {
  const [row] = await db.select().from(bucketMoves).where(eq(bucketMoves.bucket, key));
  return row;
}

const sessionsAfter = (db: Database, key: string, after: string) =>
  db
    .select()
    .from(sessions)
    .where(and(inBucket(key), gt(sessions.id, after)))
    .orderBy(sessions.id)
    .limit(PAGE);

const eventsAfter = (db: Database, key: string, after: number) =>
  db
    .select()
    .from(sessionEvents)
    .where(and(eq(sessionEvents.bucket, key), gt(sessionEvents.id, after)))
    .orderBy(sessionEvents.id)
    .limit(PAGE);

type SessionRow = typeof sessions.$inferSelect;
type EventRow = typeof sessionEvents.$inferSelect;

const insertSessions = (db: Database, rows: SessionRow[]) =>
  chunks(rows, SESSION_ROWS_PER_INSERT).map((part) => db.insert(sessions).values(part));

// In the source's order, so events of one instant keep their order on the target. A new id on
// the target, above its last (src/db/schema.ts): this bucket's events go there in the order
// they had here, and the purge takes them when it reaches those ids.
const insertEvents = (db: Database, rows: EventRow[]) =>
  chunks(rows, EVENT_ROWS_PER_INSERT).map((part) =>
    db.insert(sessionEvents).values(part.map(({ id: _, bucket: __, ...event }) => event)),
  );

/**
 * freeze, and the bucket's rows as that commit leaves them (the first page of its sessions
 * and events, and its inbound SETs): one batch on the source. From that commit on no request
 * writes the bucket there, so what is read is what gets copied.
 */
async function freezeBucket(source: Database, key: string, frozen: BucketMoveRow) {
  return batchNamed(source, {
    freeze: source.insert(bucketMoves).values(frozen).onConflictDoNothing({ target: bucketMoves.bucket }),
    firstSessions: sessionsAfter(source, key, ""),
    firstEvents: eventsAfter(source, key, 0),
    // Inbound SETs for the bucket's users within the last day (their maximum age): a
    // few rows, read at once, without an index on bucket.
    inbound: source.select().from(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
  });
}

/**
 * copy: one batch on the target for a bucket of one page: its `moved` row (so that nothing
 * there changes the bucket's rows, and a request reaching it early is sent back), what an
 * interrupted copy left cleared, and the rows. A larger bucket's further pages follow, each
 * read from the (frozen, so unchanging) source and written in a batch of its own.
 */
async function copyBucket(
  source: Database,
  target: Database,
  key: string,
  arriving: BucketMoveRow,
  { firstSessions, firstEvents, inbound }: Awaited<ReturnType<typeof freezeBucket>>,
) {
  await batchAll(target, [
    target.insert(bucketMoves).values(arriving).onConflictDoNothing({ target: bucketMoves.bucket }),
    target.delete(sessionEvents).where(eq(sessionEvents.bucket, key)),
    target.delete(sessions).where(inBucket(key)),
    target.delete(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
    ...insertSessions(target, firstSessions),
    ...insertEvents(target, firstEvents),
    ...chunks(inbound, INBOUND_ROWS_PER_INSERT).map((part) => target.insert(ssfReceivedSets).values(part)),
  ]);
  let sessionCount = firstSessions.length;
  for (let page = firstSessions; page.length === PAGE; sessionCount += page.length) {
    page = await sessionsAfter(source, key, (page.at(-1) as SessionRow).id);
    await batchAll(target, insertSessions(target, page));
  }
  let eventCount = firstEvents.length;
  for (let page = firstEvents; page.length === PAGE; eventCount += page.length) {
    page = await eventsAfter(source, key, (page.at(-1) as EventRow).id);
    await batchAll(target, insertEvents(target, page));
  }
  return { sessions: sessionCount, events: eventCount };
}

/** Refuses what cannot be moved safely, before anything is written. */
function check(plan: MovePlan, tools: MoveTools): void {
  const { map, region, first, last, to } = plan;
  if (!map.regions.has(region)) throw new MoveRefused(`SHARDS has no region "${region}"`);
  if (!Number.isInteger(first) || !Number.isInteger(last) || first < 0 || first > last || last >= BUCKET_COUNT)
    throw new MoveRefused(`buckets must be a range within 0-${BUCKET_COUNT - 1}`);
  for (const [other, owners] of map.regions) {
    if (other !== region && owners.includes(to))
      throw new MoveRefused(`${to} belongs to region "${other}"; a database belongs to one region`);
  }
  // Throws, before anything is written, when the target is no D1 binding of the environment.
  tools.open(to);
}

/**
 * Moves one bucket to `to`, from wherever it is now (SHARDS' binding, or where `moved` rows
 * lead), resuming from the step the databases show. Returns what it copied, or null when the
 * bucket was already on `to`. A bucket of one page costs five round trips: the two rows read
 * at once, then one batch per step.
 */
async function moveBucket(plan: MovePlan, bucket: number, tools: MoveTools) {
  const { region, to } = plan;
  const key = bucketKey({ region, bucket });
  const target = tools.open(to);
  const step = (name: MoveStep) => tools.afterStep?.(bucket, name);
  let source = bindingOf(plan.map, { region, bucket }) as string;
  // Two databases, read at once; the target's row is checked once the source is known.
  let [marker, arriving] = await Promise.all([markerOf(tools.open(source), key), markerOf(target, key)]);
  for (let hops = 0; ; hops++) {
    if (hops > MAX_HOPS) throw new MoveRefused(`bucket ${bucket}: too many moved rows in a row, or a loop`);
    if (marker?.state === "frozen" && marker.binding !== to)
      throw new MoveRefused(
        `bucket ${bucket} is being moved from ${source} to ${marker.binding}: finish that move first (--to ${marker.binding})`,
      );
    if (marker?.state === "moved" && marker.binding === to) {
      // Switched already: only the target's own row may be left (`open`).
      await openBucket(target, key, source);
      await step("open");
      return null;
    }
    if (marker?.state === "moved") {
      source = marker.binding;
      marker = await markerOf(tools.open(source), key);
      continue;
    }
    if (!marker && source === to) return null;
    break;
  }
  if (arriving && !(arriving.state === "moved" && arriving.binding === source))
    throw new MoveRefused(
      `bucket ${bucket}: ${to} has it as ${arriving.state} to ${arriving.binding}; expected nothing`,
    );
  const from = tools.open(source);
  const now = tools.now();
  const rows = await freezeBucket(from, key, { bucket: key, state: "frozen", binding: to, updatedAt: now });
  await step("freeze");
  const copied = await copyBucket(
    from,
    target,
    key,
    { bucket: key, state: "moved", binding: source, updatedAt: now },
    rows,
  );
  await step("copy");
  await from.batch([
    from
      .update(bucketMoves)
      .set({ state: "moved", updatedAt: tools.now() })
      .where(and(eq(bucketMoves.bucket, key), eq(bucketMoves.state, "frozen"), eq(bucketMoves.binding, to))),
    from.delete(sessionEvents).where(eq(sessionEvents.bucket, key)),
    from.delete(sessions).where(inBucket(key)),
    from.delete(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
  ]);
  await step("switch");
  await openBucket(target, key, source);
  await step("open");
  return copied;
}

/** open: the target's row, which sent requests back to `source`, goes. */
function openBucket(target: Database, key: string, source: string) {
  return target
    .delete(bucketMoves)
    .where(and(eq(bucketMoves.bucket, key), eq(bucketMoves.state, "moved"), eq(bucketMoves.binding, source)));
}

/** A part of a plan's range, for a caller that moves it a few buckets a call: from `from` on, `count` at most. */
export interface MovePart {
  from: number;
  count: number;
}

/**
 * Moves buckets `first`…`last` of `region` to `to`, a few at once: all of them, or `part` of
 * them. Either way the report's SHARDS names `to` for the whole range.
 */
export async function moveBuckets(plan: MovePlan, tools: MoveTools, part?: MovePart): Promise<MoveReport> {
  check(plan, tools);
  const { from, count } = part ?? { from: plan.first, count: plan.last - plan.first + 1 };
  if (!Number.isInteger(from) || !Number.isInteger(count) || from < plan.first || from > plan.last || count < 1)
    throw new MoveRefused(`a part of buckets ${plan.first}-${plan.last} starts within them and has one at least`);
  const report: MoveReport = { moved: 0, alreadyThere: 0, sessions: 0, events: 0, shards: "" };
  const last = Math.min(plan.last, from + count - 1);
  for (let start = from; start <= last; start += BUCKETS_AT_ONCE) {
    const buckets = Array.from({ length: Math.min(BUCKETS_AT_ONCE, last - start + 1) }, (_, index) => start + index);
    // Every bucket of the group ends its move, or stops at its own failure, before any is reported.
    const outcomes = await Promise.allSettled(buckets.map((bucket) => moveBucket(plan, bucket, tools)));
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") throw outcome.reason;
      const copied = outcome.value;
      if (!copied) {
        report.alreadyThere++;
        continue;
      }
      report.moved++;
      report.sessions += copied.sessions;
      report.events += copied.events;
    }
  }
  const owners = [...(plan.map.regions.get(plan.region) as readonly string[])];
  owners.fill(plan.to, plan.first, plan.last + 1);
  const regions = new Map(plan.map.regions).set(plan.region, owners);
  report.shards = formatShardMap({ regions, bindings: [...new Set([...plan.map.bindings, plan.to])] });
  return report;
}

/**
 * Once SHARDS names every moved bucket's new database and no version of the worker with the
 * old SHARDS runs any more: drops the `moved` rows, which only old versions still follow, in
 * one batch per database. Refuses, before dropping any, while a move is under way, or when
 * SHARDS maps a bucket to a database it left.
 */
export async function finishMoves(map: ShardMap, bindings: readonly string[], open: MoveTools["open"]) {
  const markers = await Promise.all(
    bindings.map(async (binding) => ({ binding, rows: await open(binding).select().from(bucketMoves) })),
  );
  for (const { binding, rows } of markers) {
    for (const row of rows) {
      if (row.state === "frozen")
        throw new MoveRefused(`a move from ${binding} to ${row.binding} is under way: run shards:move again first`);
    }
  }
  for (const { binding, rows } of markers) {
    for (const row of rows) {
      const placement = placementOf(`${row.bucket}${"A".repeat(RANDOM_LENGTH)}`);
      if (placement && bindingOf(map, placement) === binding)
        throw new MoveRefused(
          `SHARDS maps bucket ${row.bucket} to ${binding}, which sends it on to ${row.binding}: run shards:move again, or deploy the SHARDS it printed`,
        );
    }
  }
  let dropped = 0;
  for (const { binding, rows } of markers) {
    const db = open(binding);
    // D1 binds at most 100 values per statement.
    const buckets = chunks(
      rows.map((row) => row.bucket),
      100,
    );
    await batchAll(
      db,
      buckets.map((part) => db.delete(bucketMoves).where(inArray(bucketMoves.bucket, part))),
    );
    dropped += rows.length;
  }
  return { dropped };
}
