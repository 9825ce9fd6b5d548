import { and, eq, getTableColumns, gt, gte, lt, sql } from "drizzle-orm";
import { BUCKET_COUNT, bucketKey, placementOf, RANDOM_LENGTH } from "../domain/token.ts";
import { batchAll, chunks, type Database } from "./client.ts";
import { type BucketMoveRow, bucketMoves, sessionEvents, sessions, ssfReceivedSets } from "./schema.ts";
import { bindingOf, formatShardMap, type ShardMap } from "./shards.ts";

// Moving buckets of users from one D1 database to another while the service answers
// (`npm run shards:move`, scripts/shards.ts; why it is safe: ARCHITECTURE.md, "Moving a
// bucket"). One bucket at a time, in four steps, each one round trip or a few, each safe to
// run again:
//
//   freeze  source: bucket_moves row (bucket, frozen, target). From this commit on, no
//           request writes the bucket there (src/db/buckets.ts guards every write); reads
//           still answer from it.
//   copy    target: row (bucket, moved, source), so that a request reaching the target
//           early is sent back to the source, and nothing there can change the bucket's
//           rows; what an interrupted copy left there is cleared, then the bucket's sessions,
//           events and inbound SETs are copied from the (frozen, so unchanging) source.
//           Events get new row ids; every other field is kept.
//   switch  source, one batch: the row becomes (moved, target) and the bucket's sessions,
//           events and inbound SETs are deleted. Requests now follow the row to the target.
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

/**
 * Copies the frozen bucket's rows from `source` to `target`, after clearing what an
 * interrupted copy left there (the target's `moved` row keeps every request off them).
 */
async function copyBucket(source: Database, target: Database, key: string) {
  await target.batch([
    target.delete(sessionEvents).where(eq(sessionEvents.bucket, key)),
    target.delete(sessions).where(inBucket(key)),
    target.delete(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key)),
  ]);
  let sessionCount = 0;
  for (let after = ""; ; ) {
    const rows = await source
      .select()
      .from(sessions)
      .where(and(inBucket(key), gt(sessions.id, after)))
      .orderBy(sessions.id)
      .limit(PAGE);
    await batchAll(
      target,
      chunks(rows, SESSION_ROWS_PER_INSERT).map((part) => target.insert(sessions).values(part)),
    );
    sessionCount += rows.length;
    if (rows.length < PAGE) break;
    after = (rows.at(-1) as (typeof rows)[number]).id;
  }
  let eventCount = 0;
  for (let after = 0; ; ) {
    const rows = await source
      .select()
      .from(sessionEvents)
      .where(and(eq(sessionEvents.bucket, key), gt(sessionEvents.id, after)))
      .orderBy(sessionEvents.id)
      .limit(PAGE);
    // In the source's order, so events of one instant keep their order on the target.
    await batchAll(
      target,
      chunks(rows, EVENT_ROWS_PER_INSERT).map((part) =>
        // A new id on the target, above its last (src/db/schema.ts): this bucket's events go
        // there in the order they had here, and the purge takes them when it reaches those ids.
        target.insert(sessionEvents).values(part.map(({ id: _, bucket: __, ...event }) => event)),
      ),
    );
    eventCount += rows.length;
    if (rows.length < PAGE) break;
    after = (rows.at(-1) as (typeof rows)[number]).id;
  }
  // Inbound SETs for the bucket's users within the last day (their maximum age): a
  // few rows, read at once, without an index on bucket.
  const inbound = await source.select().from(ssfReceivedSets).where(eq(ssfReceivedSets.bucket, key));
  await batchAll(
    target,
    chunks(inbound, INBOUND_ROWS_PER_INSERT).map((part) => target.insert(ssfReceivedSets).values(part)),
  );
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
 * bucket was already on `to`.
 */
async function moveBucket(plan: MovePlan, bucket: number, tools: MoveTools) {
  const { region, to } = plan;
  const key = bucketKey({ region, bucket });
  const target = tools.open(to);
  const step = (name: MoveStep) => tools.afterStep?.(bucket, name);
  let source = bindingOf(plan.map, { region, bucket }) as string;
  for (let hops = 0; ; hops++) {
    if (hops > MAX_HOPS) throw new MoveRefused(`bucket ${bucket}: too many moved rows in a row, or a loop`);
    const marker = await markerOf(tools.open(source), key);
    if (marker?.state === "frozen" && marker.binding !== to)
      throw new MoveRefused(
        `bucket ${bucket} is being moved from ${source} to ${marker.binding}: finish that move first (--to ${marker.binding})`,
      );
    if (marker?.state === "moved" && marker.binding === to) {
      // Switched already: only the target's own row may be left (`open`).
      await target
        .delete(bucketMoves)
        .where(and(eq(bucketMoves.bucket, key), eq(bucketMoves.state, "moved"), eq(bucketMoves.binding, source)));
      await step("open");
      return null;
    }
    if (marker?.state === "moved") {
      source = marker.binding;
      continue;
    }
    if (!marker && source === to) return null;
    break;
  }
  const from = tools.open(source);
  const arriving = await markerOf(target, key);
  if (arriving && !(arriving.state === "moved" && arriving.binding === source))
    throw new MoveRefused(
      `bucket ${bucket}: ${to} has it as ${arriving.state} to ${arriving.binding}; expected nothing`,
    );
  const now = tools.now();
  await from
    .insert(bucketMoves)
    .values({ bucket: key, state: "frozen", binding: to, updatedAt: now })
    .onConflictDoNothing({ target: bucketMoves.bucket });
  await step("freeze");
  await target
    .insert(bucketMoves)
    .values({ bucket: key, state: "moved", binding: source, updatedAt: now })
    .onConflictDoNothing({ target: bucketMoves.bucket });
  const copied = await copyBucket(from, target, key);
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
  await target
    .delete(bucketMoves)
    .where(and(eq(bucketMoves.bucket, key), eq(bucketMoves.state, "moved"), eq(bucketMoves.binding, source)));
  await step("open");
  return copied;
}

/** Moves buckets `first`…`last` of `region` to `to`, one bucket at a time. */
export async function moveBuckets(plan: MovePlan, tools: MoveTools): Promise<MoveReport> {
  check(plan, tools);
  const report: MoveReport = { moved: 0, alreadyThere: 0, sessions: 0, events: 0, shards: "" };
  for (let bucket = plan.first; bucket <= plan.last; bucket++) {
    const copied = await moveBucket(plan, bucket, tools);
    if (!copied) {
      report.alreadyThere++;
      continue;
    }
    report.moved++;
    report.sessions += copied.sessions;
    report.events += copied.events;
  }
  const owners = [...(plan.map.regions.get(plan.region) as readonly string[])];
  owners.fill(plan.to, plan.first, plan.last + 1);
  const regions = new Map(plan.map.regions).set(plan.region, owners);
  report.shards = formatShardMap({ regions, bindings: [...new Set([...plan.map.bindings, plan.to])] });
  return report;
}

/**
 * Once SHARDS names every moved bucket's new database and no version of the worker with the
 * old SHARDS runs any more: drops the `moved` rows, which only old versions still follow.
 * Refuses while a move is under way, or when SHARDS maps a bucket to a database it left.
 */
export async function finishMoves(map: ShardMap, bindings: readonly string[], open: MoveTools["open"]) {
  const markers = new Map<string, BucketMoveRow[]>();
  for (const binding of bindings) markers.set(binding, await open(binding).select().from(bucketMoves));
  for (const [binding, rows] of markers) {
    for (const row of rows) {
      if (row.state === "frozen")
        throw new MoveRefused(`a move from ${binding} to ${row.binding} is under way: run shards:move again first`);
    }
  }
  let dropped = 0;
  for (const [binding, rows] of markers) {
    for (const row of rows) {
      const placement = placementOf(`${row.bucket}${"A".repeat(RANDOM_LENGTH)}`);
      const configured = placement && bindingOf(map, placement);
      if (configured === binding)
        throw new MoveRefused(
          `SHARDS maps bucket ${row.bucket} to ${binding}, which sends it on to ${row.binding}: run shards:move again, or deploy the SHARDS it printed`,
        );
      await open(binding).delete(bucketMoves).where(eq(bucketMoves.bucket, row.bucket));
      dropped++;
    }
  }
  return { dropped };
}
