// What every phase of the benchmark (bench/bench.ts) shares: where the project is, the
// progress log on stderr, the problems found so far (any one makes the run exit 1), and the
// number formats of the report.
import { fileURLToPath } from "node:url";

export const PROJECT = fileURLToPath(new URL("..", import.meta.url));

const benchStart = performance.now();
export const log = (message: string) =>
  console.error(`bench: [${((performance.now() - benchStart) / 1000).toFixed(1)} s] ${message}`);
export const fmt = (value: number, digits = 0) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};
export const problems: string[] = [];
