import { type Database, openDatabase } from "../db/client.ts";
import {
  type BucketMoveRow,
  copyBucket,
  copyEvents,
  copySessions,
  dropMoveRows,
  type FrozenRows,
  freezeBucket,
  MOVE_PAGE,
  type MoveEventRow,
  type MoveSessionRow,
  openBucket,
  readEventsAfter,
  readMoveRow,
  readMoveRows,
  readSessionsAfter,
  switchBucket,
} from "../db/moves.ts";
import { bindingOf, formatShardMap, parseShardMap, type ShardMap, STREAMS_BINDING } from "../db/shards.ts";
import { BUCKET_COUNT, bucketKey, placementOf, RANDOM_LENGTH } from "../domain/token.ts";
import { copyMissingPolicyRows } from "./organizations/directory.ts";

// Moving buckets of users from one D1 database to another while the service answers
// (`npm run shards:move`, scripts/shards.ts; why it is safe: ARCHITECTURE.md, "Moving a
// bucket"): the order of the steps, each one a round trip of src/db/moves.ts (a bucket of more
// than a page of rows: a few), which says what each writes. Each bucket goes through its own
// four steps, freeze and copy, switch, open; a few buckets move at once.
//
// What a database holds says how far a bucket got, so an interrupted move is finished by
// running it again. Until SHARDS names the target, requests for the bucket reach the
// source first and follow its `moved` row (one more round trip); `finishMoves` drops those
// rows once SHARDS is deployed.
//
// The operator's `shards:move` runs it on the databases it is given (`moveBucketRange`): the
// local SQLite files, Cloudflare's through wrangler's remote bindings, or, while `npm start`
// serves, the server's own D1 inside its operator gateway (dev/dev-worker.ts), where a
// step costs the command no round trip of its own.

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

/** A part of a plan's range, for a caller that moves it a few buckets a call: from `from` on, `count` at most. */
export interface MovePart {
  from: number;
  count: number;
}

/** A move follows `moved` rows this many times at most (a move of a move, before SHARDS caught up). */
const MAX_HOPS = 8;
/**
 * Buckets moved at once, each through its own steps: a bucket's rows and move rows are its
 * own, so their moves do not meet, and their round trips wait in each database's queue
 * together rather than one after another.
 */
const BUCKETS_AT_ONCE = 64;

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
 * copy: the first batch on the target writes the rows the freeze read; a larger bucket's
 * further pages follow, each read from the (frozen, so unchanging) source and written in a
 * batch of its own. Answers how many sessions and events were copied.
 */
async function copyAll(source: Database, target: Database, key: string, arriving: BucketMoveRow, rows: FrozenRows) {
  await copyBucket(target, key, arriving, rows);
  let sessionCount = rows.firstSessions.length;
  for (let page = rows.firstSessions; page.length === MOVE_PAGE; sessionCount += page.length) {
    page = await readSessionsAfter(source, key, (page.at(-1) as MoveSessionRow).id);
    await copySessions(target, page);
  }
  let eventCount = rows.firstEvents.length;
  for (let page = rows.firstEvents; page.length === MOVE_PAGE; eventCount += page.length) {
    page = await readEventsAfter(source, key, (page.at(-1) as MoveEventRow).id);
    await copyEvents(target, page);
  }
  return { sessions: sessionCount, events: eventCount };
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
  let [marker, arriving] = await Promise.all([readMoveRow(tools.open(source), key), readMoveRow(target, key)]);
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
      marker = await readMoveRow(tools.open(source), key);
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
  const copied = await copyAll(
    from,
    target,
    key,
    { bucket: key, state: "moved", binding: source, updatedAt: now },
    rows,
  );
  await step("copy");
  await switchBucket(from, key, to, tools.now());
  await step("switch");
  await openBucket(target, key, source);
  await step("open");
  return copied;
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
  // Before the range's first bucket, the target gets every organization's policy row it lacks
  // (a database new to SHARDS has none, and creating an organization writes only those SHARDS
  // names), so that a member's sign-in in a moved bucket finds its organization there. Each
  // bucket's copy brings its members' rows too, for an organization created since.
  if (from === plan.first && plan.to !== STREAMS_BINDING)
    await copyMissingPolicyRows(tools.open(STREAMS_BINDING), [{ binding: plan.to, db: tools.open(plan.to) }]);
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
    bindings.map(async (binding) => ({ binding, rows: await readMoveRows(open(binding)) })),
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
    await dropMoveRows(
      open(binding),
      rows.map((row) => row.bucket),
    );
    dropped += rows.length;
  }
  return { dropped };
}

export interface MoveDatabases {
  /** SHARDS as these databases are served with. */
  shards: string;
  /** Every D1 binding of the environment, SHARDS-named or not. */
  bindings: readonly string[];
  d1(binding: string): D1Database;
}

/** What the operator asked to move: buckets `first`…`last` of `region` to the binding `to`. */
export interface MoveAsked {
  region: string;
  first: number;
  last: number;
  to: string;
}

function opener(databases: MoveDatabases) {
  return (binding: string) => {
    if (!databases.bindings.includes(binding))
      throw new MoveRefused(`${binding} is not a d1_databases binding of this environment`);
    return openDatabase(databases.d1(binding));
  };
}

/**
 * Moves the buckets asked, one after another, or `part` of them (the report's SHARDS is the
 * whole range's either way); a refusal comes before anything is written.
 */
export function moveBucketRange(databases: MoveDatabases, asked: MoveAsked, part?: MovePart): Promise<MoveReport> {
  const plan = { map: parseShardMap(databases.shards), ...asked };
  return moveBuckets(plan, { open: opener(databases), now: () => new Date() }, part);
}

/** `shards:move --finish`: drops the `moved` rows once their SHARDS is deployed. */
export function finishMoving(databases: MoveDatabases): Promise<{ dropped: number }> {
  return finishMoves(parseShardMap(databases.shards), databases.bindings, opener(databases));
}

/** The databases SHARDS names, in the order first named; throws a ConfigError on a bad value. */
export function shardBindingsOf(shards: string): readonly string[] {
  return parseShardMap(shards).bindings;
}
