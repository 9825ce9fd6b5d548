// How evenly users spread over databases, with the worker's own placement code
// (src/db/shards.ts, asked through src/services/placement.ts): places synthetic user ids
// (`user-1` … `user-<N>`) in buckets, maps the buckets in equal ranges onto 4, 16 and 64
// databases, and prints users per database (max/mean, min/mean). Usage: npm run shards:balance [-- --users 10000000]
// The worker hashes with crypto.subtle; in bulk node:crypto's SHA-256 is ~20x faster, so the
// ids are hashed with it, and the first 10,000 are checked to land where the worker puts them.
import { createHash } from "node:crypto";
import { BUCKET_COUNT } from "../src/domain/token.ts";
import { bindingsByBucket, bucketOf, bucketOfDigest } from "../src/services/placement.ts";
import { parseOptions, refuse } from "./options.ts";

const USAGE = "usage: npm run shards:balance [-- --users <count>]";
const { values } = parseOptions(process.argv.slice(2), { users: { type: "string", default: "10000000" } }, USAGE);
const users = Number(values.users);
if (!Number.isSafeInteger(users) || users < 1) refuse("--users must be a positive integer", USAGE);

const started = performance.now();
const perBucket = new Array<number>(BUCKET_COUNT).fill(0);
for (let i = 1; i <= users; i++) {
  const userId = `user-${i}`;
  const bucket = bucketOfDigest(createHash("sha256").update(userId).digest());
  if (i <= 10_000 && bucket !== (await bucketOf(userId)))
    throw new Error(`${userId}: node:crypto and crypto.subtle disagree`);
  perBucket[bucket] = (perBucket[bucket] ?? 0) + 1;
}
const seconds = (performance.now() - started) / 1000;

/** The SHARDS value a deployment of `count` databases in equal bucket ranges would use. */
function evenMap(count: number): string {
  const size = BUCKET_COUNT / count;
  const ranges = Array.from({ length: count }, (_, i) => [`${i * size}-${(i + 1) * size - 1}`, `DB_${i}`]);
  return JSON.stringify({ default: Object.fromEntries(ranges) });
}

const ratio = (n: number) => n.toFixed(4);
console.log(
  `${users.toLocaleString("en-US")} user ids placed in ${seconds.toFixed(1)} s (SHA-256, ${BUCKET_COUNT} buckets)`,
);
console.log("");
console.log("| databases | users per database (mean) | max | min | max/mean | min/mean |");
console.log("|---|---|---|---|---|---|");
for (const count of [4, 16, 64]) {
  const bindings = bindingsByBucket(evenMap(count));
  const perDatabase = new Map<string, number>();
  perBucket.forEach((n, bucket) => {
    const binding = bindings[bucket] as string;
    perDatabase.set(binding, (perDatabase.get(binding) ?? 0) + n);
  });
  const loads = [...perDatabase.values()];
  const mean = users / count;
  const max = Math.max(...loads);
  const min = Math.min(...loads);
  console.log(
    `| ${count} | ${Math.round(mean).toLocaleString("en-US")} | ${max.toLocaleString("en-US")} | ${min.toLocaleString("en-US")} | ${ratio(max / mean)} | ${ratio(min / mean)} |`,
  );
}
const bucketMean = users / BUCKET_COUNT;
console.log(
  `| (${BUCKET_COUNT} buckets) | ${Math.round(bucketMean).toLocaleString("en-US")} | ${Math.max(...perBucket).toLocaleString("en-US")} | ${Math.min(...perBucket).toLocaleString("en-US")} | ${ratio(Math.max(...perBucket) / bucketMean)} | ${ratio(Math.min(...perBucket) / bucketMean)} |`,
);
