import { openDatabase } from "../db/client.ts";
import { finishMoves, type MovePart, MoveRefused, type MoveReport, moveBuckets } from "../db/moves.ts";
import { parseShardMap } from "../db/shards.ts";

// The operator's `shards:move` (scripts/shards.ts) on the databases it is given: the local
// SQLite files, Cloudflare's through wrangler's remote bindings, or, while `npm start`
// serves, the server's own D1 inside its operator gateway (dev/dev-worker.ts), where a
// step costs the command no round trip of its own.

export { type MovePart, MoveRefused, type MoveReport };

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
