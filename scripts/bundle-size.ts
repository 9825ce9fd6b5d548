// Measures the worker bundle exactly as `wrangler deploy` would upload it (wrangler.toml has
// `minify = true`), without deploying: `wrangler deploy --dry-run --outdir <temp dir>`.
// Prints the minified and gzip (level 9) sizes and fails when gzip exceeds the budget.
//   npm run size            (node scripts/bundle-size.ts)
// `measureBundle()` is reused by `npm run bench`.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { constants, gzipSync } from "node:zlib";

/**
 * Budget for the gzip size of the uploaded modules (issue 12: at most 40,000 B). Measured
 * 38,232 B gzip (124,237 B minified) on 2026-11-22, once /openapi.json became a static asset
 * (assets/, outside the bundle) and Hono kept one router; a new dependency or a sizeable
 * feature that breaks it is let in on purpose, by shrinking something else or by raising
 * this with the new measurement, rather than creeping in. Raised to 40,500 B on 2026-11-24:
 * 40,337 B measured with the log line that lets an operator read every 5xx (message redacted,
 * route or RPC method, D1 binding, Ray ID) and lock errors retried (+414 B). Raised to
 * 42,000 B the same day: 41,662 B with re-authentication, token rotation and step-up
 * (+1,325 B: the factor list, the checks, the RPC method, the RFC 9470 refusal). Raised to
 * 44,500 B for device-bound sessions: 44,019 B (+2,344 B: proof verification on WebCrypto,
 * the registration and refresh routes, their error codes, the bound-cookie rules). Raised to
 * 49,500 B on 2026-11-25: 49,288 B once the worker serves /openapi.json again (+5,137 B: the
 * document's builder, now src/http/openapi.ts). The asset layer that kept it out put its router
 * in front of every /auth/ request under `wrangler dev`: the 404 went from 0.70 to 0.96 of
 * better-auth's `/health`, and every operation ~25% faster, side by side (BENCHMARKS.md).
 * Raised to 49,800 B the same day, 1% above the 49,307 B measured before src/ was split into
 * floors (issue 22): 49,641 B after (+334 B, no feature: services answer plain values that the
 * RPC door turns into cookies, each caller hands a write's events to the outbox, and the
 * modules compress a little worse in their new order).
 * Raised to 51,200 B for the Shared Signals transmitter's discovery (issue 24): 49,795 B before,
 * 51,152 B after (+1,357 B: the two documents, the key set's checks, and their OpenAPI entries).
 * Raised to 58,600 B for its streams (issue 24): 51,152 B before, 58,406 B after (+7,254 B: the
 * tables' schema 461 B, six management and poll endpoints with their checks, statements and
 * SET signing ~4.4 KB, and their OpenAPI entries ~2.4 KB of the served document).
 * Raised to 60,500 B for their delivery (issue 24): 58,406 B before, 60,278 B after (+1,872 B:
 * session events as CAEP SETs, push with retries, the minute cron, the retention purge).
 * Raised to 64,000 B for the receiver (issue 24): 60,278 B before, 63,696 B after (+3,418 B:
 * POST /ssf/receiver, its SSF_UPSTREAMS checks, SET verification and actions, remote key sets,
 * its OpenAPI entry).
 * Raised to 66,000 B for session context checks (issue 34): 63,842 B before, 65,759 B after
 * (+1,917 B: the context's parsing and policies, the check's five statements at the head of
 * each operation's batch, the held-session answers of the routes and RPC, `last_seen`, and
 * their OpenAPI entries, ~540 B of the served document).
 */
export const GZIP_BUDGET_BYTES = 66_000;

export interface BundleSize {
  /** Bytes of the worker's modules as uploaded (minified; source maps excluded). */
  minifiedBytes: number;
  /** The same modules gzipped at level 9, summed per module. */
  gzipBytes: number;
  modules: { name: string; minifiedBytes: number; gzipBytes: number }[];
}

const PROJECT = fileURLToPath(new URL("..", import.meta.url));
// Files in --outdir that are not uploaded as modules.
const NOT_A_MODULE = /(\.map|^README\.md)$/;

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: PROJECT, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(" ")} failed (${signal ?? `exit ${code}`}):\n${output}`));
    });
  });
}

export async function measureBundle(): Promise<BundleSize> {
  const cache = join(PROJECT, "node_modules", ".cache");
  mkdirSync(cache, { recursive: true });
  const outdir = mkdtempSync(join(cache, "bundle-size-"));
  try {
    await run("npx", ["wrangler", "deploy", "--dry-run", "--outdir", outdir]);
    const modules = readdirSync(outdir)
      .filter((name) => !NOT_A_MODULE.test(name))
      .sort()
      .map((name) => {
        const bytes = readFileSync(join(outdir, name));
        return {
          name,
          minifiedBytes: bytes.length,
          gzipBytes: gzipSync(bytes, { level: constants.Z_BEST_COMPRESSION }).length,
        };
      });
    if (modules.length === 0) throw new Error(`wrangler deploy --dry-run wrote no module to ${outdir}`);
    return {
      minifiedBytes: modules.reduce((sum, m) => sum + m.minifiedBytes, 0),
      gzipBytes: modules.reduce((sum, m) => sum + m.gzipBytes, 0),
      modules,
    };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

export function formatBytes(bytes: number): string {
  return `${bytes.toLocaleString("en-US")} B (${(bytes / 1024).toFixed(1)} KiB)`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const size = await measureBundle();
    for (const m of size.modules) {
      console.log(`${m.name}: minified ${formatBytes(m.minifiedBytes)}, gzip -9 ${formatBytes(m.gzipBytes)}`);
    }
    console.log(`minified: ${formatBytes(size.minifiedBytes)}`);
    console.log(`gzip -9:  ${formatBytes(size.gzipBytes)} (budget ${formatBytes(GZIP_BUDGET_BYTES)})`);
    if (size.gzipBytes > GZIP_BUDGET_BYTES) {
      console.error(
        `bundle-size: the gzip size ${formatBytes(size.gzipBytes)} exceeds the budget ${formatBytes(GZIP_BUDGET_BYTES)} ` +
          `by ${(size.gzipBytes - GZIP_BUDGET_BYTES).toLocaleString("en-US")} B. Shrink the bundle, or raise ` +
          "GZIP_BUDGET_BYTES in scripts/bundle-size.ts on purpose, with the new measurement.",
      );
      process.exitCode = 1;
    } else {
      console.log(`within budget by ${(GZIP_BUDGET_BYTES - size.gzipBytes).toLocaleString("en-US")} B`);
    }
  } catch (error) {
    console.error(`bundle-size: ${error instanceof Error ? error.message : error}`);
    process.exitCode = 1;
  }
}
