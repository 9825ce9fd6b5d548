// Measures the worker bundle exactly as `wrangler deploy` would upload it (wrangler.toml has
// `minify = true`), without deploying: `wrangler deploy --dry-run --outdir <temp dir>`.
// Prints the minified and gzip (level 9) sizes and fails when gzip exceeds the budget.
//   npm run size            (node test/checks/bundle-size.ts)
// `measureBundle()` is reused by `npm run bench`.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { constants, gzipSync } from "node:zlib";

/**
 * Budget for the gzip size of the uploaded modules. A new dependency or a sizeable feature that
 * breaks it is let in on purpose, by shrinking something else or by raising this with the new
 * measurement, rather than creeping in; each raise and its measurement: docs/bundle-budget.md.
 */
export const GZIP_BUDGET_BYTES = 121_200;

export interface BundleSize {
  /** Bytes of the worker's modules as uploaded (minified; source maps excluded). */
  minifiedBytes: number;
  /** The same modules gzipped at level 9, summed per module. */
  gzipBytes: number;
  modules: { name: string; minifiedBytes: number; gzipBytes: number }[];
}

const PROJECT = fileURLToPath(new URL("../..", import.meta.url));
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
          "GZIP_BUDGET_BYTES in test/checks/bundle-size.ts on purpose, with the new measurement.",
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
