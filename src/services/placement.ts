import { bindingOf, parseShardMap } from "../db/shards.ts";
import { BUCKET_COUNT, DEFAULT_REGION } from "../domain/token.ts";

// Where a user's sessions live, asked without opening a database: the worker's own placement
// code (src/db/shards.ts), for an operator command that studies it (`npm run shards:balance`,
// scripts/shards-balance.ts) and may not import src/db/ itself.

export { bucketOf, bucketOfDigest } from "../db/shards.ts";

/**
 * The binding a SHARDS value maps each bucket of `region` to, by bucket (null where the
 * region is not in it); throws a ConfigError on a bad value.
 */
export function bindingsByBucket(shards: string, region: string = DEFAULT_REGION): readonly (string | null)[] {
  const map = parseShardMap(shards);
  return Array.from({ length: BUCKET_COUNT }, (_, bucket) => bindingOf(map, { region, bucket }));
}
