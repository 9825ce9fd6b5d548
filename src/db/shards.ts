import { ConfigError, parsedOnce } from "../domain/config.ts";
import { InvalidInput } from "../domain/invalid-input.ts";
import {
  BUCKET_COUNT,
  bucketKey,
  DEFAULT_REGION,
  type Placement,
  placementOf,
  RANDOM_LENGTH,
  REGION_PATTERN,
} from "../domain/token.ts";
import { type Database, openDatabase } from "./client.ts";
import { namingFailures } from "./d1.ts";

// The one place that chooses a database. All sessions and events of a user live in one D1
// database, found without a lookup: the user id hashes to one of BUCKET_COUNT virtual
// buckets, and the `SHARDS` var maps each region's buckets to D1 bindings. A session id
// carries its region and bucket (src/domain/token.ts), so a token alone names its database.
//
// SHARDS is JSON: region → { "<first>-<last>" bucket range: binding }, e.g.
//   {"default": {"0-2047": "DB", "2048-4095": "DB_1"}, "eu": {"0-4095": "DB_EU_1"}}
// Every region covers every bucket exactly once, and a database belongs to one region.

export interface ShardMap {
  /** Per region, the binding of each bucket. */
  regions: ReadonlyMap<string, readonly string[]>;
  /** Every binding named, once each, in the order first named. */
  bindings: readonly string[];
}

/** Parses and checks a SHARDS value; throws a ConfigError saying what is wrong. */
export function parseShardMap(text: string | undefined): ShardMap {
  let raw: unknown;
  try {
    raw = JSON.parse(text ?? "");
  } catch {
    throw new ConfigError('SHARDS must be JSON: {region: {"<first>-<last>": binding}}');
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw new ConfigError("SHARDS must be a JSON object of regions");
  const regions = new Map<string, string[]>();
  const regionOfBinding = new Map<string, string>();
  for (const [region, ranges] of Object.entries(raw)) {
    if (region !== DEFAULT_REGION && !REGION_PATTERN.test(region))
      throw new ConfigError(`SHARDS: region "${region}" must be "${DEFAULT_REGION}" or two lowercase letters`);
    if (typeof ranges !== "object" || ranges === null || Array.isArray(ranges))
      throw new ConfigError(`SHARDS.${region} must map bucket ranges to bindings`);
    const owners: (string | undefined)[] = new Array(BUCKET_COUNT).fill(undefined);
    for (const [range, binding] of Object.entries(ranges)) {
      const match = /^(\d+)(?:-(\d+))?$/.exec(range);
      const first = Number(match?.[1]);
      const last = Number(match?.[2] ?? match?.[1]);
      if (!match || first > last || last >= BUCKET_COUNT)
        throw new ConfigError(`SHARDS.${region}: "${range}" is not a bucket range within 0-${BUCKET_COUNT - 1}`);
      if (typeof binding !== "string" || binding === "")
        throw new ConfigError(`SHARDS.${region}["${range}"] must name a D1 binding`);
      if ((regionOfBinding.get(binding) ?? region) !== region)
        throw new ConfigError(`SHARDS: ${binding} is in two regions; a database belongs to one`);
      regionOfBinding.set(binding, region);
      for (let bucket = first; bucket <= last; bucket++) {
        if (owners[bucket] !== undefined)
          throw new ConfigError(`SHARDS.${region}: bucket ${bucket} is mapped twice (${owners[bucket]}, ${binding})`);
        owners[bucket] = binding;
      }
    }
    const missing = owners.indexOf(undefined);
    if (missing !== -1) throw new ConfigError(`SHARDS.${region}: bucket ${missing} is not mapped to any database`);
    regions.set(region, owners as string[]);
  }
  if (!regions.has(DEFAULT_REGION)) throw new ConfigError(`SHARDS must have a "${DEFAULT_REGION}" region`);
  return { regions, bindings: [...regionOfBinding.keys()] };
}

/** A SHARDS value for `map`: each region's consecutive buckets on one binding as one range. */
export function formatShardMap(map: ShardMap): string {
  const regions: Record<string, Record<string, string>> = {};
  for (const [region, owners] of map.regions) {
    const ranges: Record<string, string> = {};
    let first = 0;
    for (let bucket = 1; bucket <= owners.length; bucket++) {
      if (bucket < owners.length && owners[bucket] === owners[first]) continue;
      ranges[first === bucket - 1 ? `${first}` : `${first}-${bucket - 1}`] = owners[first] as string;
      first = bucket;
    }
    regions[region] = ranges;
  }
  return JSON.stringify(regions);
}

const shardMapFrom = parsedOnce(parseShardMap);

function boundD1(env: Env, binding: string): D1Database | null {
  const value = (env as unknown as Record<string, unknown>)[binding] as Partial<D1Database> | undefined;
  return typeof value?.prepare === "function" && typeof value.batch === "function" ? (value as D1Database) : null;
}

function d1Binding(env: Env, binding: string): D1Database {
  const d1 = boundD1(env, binding);
  if (!d1) throw new ConfigError(`SHARDS names ${binding}, which is not a D1 binding of this worker`);
  return d1;
}

/** The deployment's shard map, checked against the bindings it names. */
export function readShardMap(env: Env): ShardMap {
  const map = shardMapFrom(env.SHARDS);
  for (const binding of map.bindings) d1Binding(env, binding);
  return map;
}

/** The user's virtual bucket: the first 12 bits of SHA-256(user id). The same in every region. */
export async function bucketOf(userId: string): Promise<number> {
  return bucketOfDigest(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(userId))));
}

/** The bucket of a user id's SHA-256 digest (scripts hash with node:crypto, far faster in bulk). */
export function bucketOfDigest(digest: Uint8Array): number {
  return (((digest[0] as number) << 8) | (digest[1] as number)) >> 4;
}

/** The binding that holds a placement, or null when this deployment has no such database. */
export function bindingOf(map: ShardMap, placement: Placement): string | null {
  return map.regions.get(placement.region)?.[placement.bucket] ?? null;
}

export interface Shard {
  binding: string;
  db: Database;
}

/**
 * One bucket on the database SHARDS maps it to: where a user's operation runs. A bucket
 * being moved may send it on to another database (src/db/buckets.ts `onBucket`).
 */
export interface BucketShard extends Shard {
  /** The bucket as its session ids' prefix (src/domain/token.ts `bucketKey`). */
  bucket: string;
  /** The same bucket on another database of this worker, where a move took it; null if not bound here. */
  elsewhere(binding: string): BucketShard | null;
}

export interface Shards {
  map: ShardMap;
  /**
   * Where a user's sessions live, and the placement new ones are issued with. `region` is
   * the account's home region (none: the default one); an unknown region is refused.
   */
  forUser(userId: string, region?: unknown): Promise<BucketShard & { placement: Placement }>;
  /** Where a session lives; null when the id names no database here (no session of ours). */
  forSession(id: string): BucketShard | null;
  all(): Shard[];
  /** Where Shared Signals receivers and streams live: the database bound as STREAMS_BINDING. */
  streams(): Shard;
  /**
   * Moves followed so far (`BucketShard.elsewhere`), for the request log: by the answer, since no
   * work after it (the outbox, a key's last use) runs an operation on a bucket.
   */
  forwards(): number;
}

/** Streams are few and read by every delivery: one database holds them, whatever SHARDS says. */
export const STREAMS_BINDING = "DB";

/**
 * The deployment's databases, each opened at most once (so two lookups of one database
 * give the same handle) through `wrap` (e.g. a round-trip meter) and `openDatabase`.
 */
export function openShards(env: Env, wrap: (d1: D1Database, binding: string) => D1Database = (d1) => d1): Shards {
  const map = readShardMap(env);
  const opened = new Map<string, Shard>();
  const shard = (binding: string): Shard => {
    let found = opened.get(binding);
    if (!found) {
      found = { binding, db: openDatabase(namingFailures(wrap(d1Binding(env, binding), binding), binding)) };
      opened.set(binding, found);
    }
    return found;
  };
  let forwards = 0;
  const bucketShard = (binding: string, bucket: string): BucketShard => ({
    ...shard(binding),
    bucket,
    elsewhere: (other) => {
      if (!boundD1(env, other)) return null;
      forwards++;
      return bucketShard(other, bucket);
    },
  });
  return {
    map,
    async forUser(userId, region) {
      const home = region ?? DEFAULT_REGION;
      if (typeof home !== "string" || !map.regions.has(home)) {
        const known = [...map.regions.keys()].filter((name) => name !== DEFAULT_REGION);
        const given = typeof home === "string" ? JSON.stringify(home) : `a ${typeof home}`;
        throw new InvalidInput(
          `region must be one of the configured regions (${known.join(", ") || "none besides the default"}) or absent, not ${given}`,
        );
      }
      const placement = { region: home, bucket: await bucketOf(userId) };
      return { ...bucketShard(bindingOf(map, placement) as string, bucketKey(placement)), placement };
    },
    forSession(id) {
      const placement = placementOf(id);
      const binding = placement && bindingOf(map, placement);
      return binding ? bucketShard(binding, id.slice(0, id.length - RANDOM_LENGTH)) : null;
    },
    all: () => map.bindings.map(shard),
    streams: () => shard(STREAMS_BINDING),
    forwards: () => forwards,
  };
}
