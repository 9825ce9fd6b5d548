// Pins the project's own lint rules, Biome plugins (experimental in Biome): each plugin biome.json
// runs on src/ is run by itself on its fixtures, and must report exactly the lines a fixture
// marks `// planted`, once each, and nothing in its clean fixture. A Biome upgrade that turns a
// rule into a no-op, or a change that stops it seeing a planted form, fails `npm run lint`.
//   node test/checks/lint-rules.ts    (the end of `npm run lint`)
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const PROJECT = fileURLToPath(new URL("../..", import.meta.url));
const FIXTURES = "test/checks/fixtures";

/** Each plugin and its fixtures: one of planted violations, one without any. */
const RULES = [
  {
    plugin: "test/checks/drizzle-public-api.grit",
    planted: `${FIXTURES}/drizzle-internals.ts`,
    clean: `${FIXTURES}/drizzle-clean.ts`,
  },
  {
    plugin: "test/checks/compiled-at-load.grit",
    planted: `${FIXTURES}/compiled-in-a-request.ts`,
    clean: `${FIXTURES}/compiled-clean.ts`,
  },
];

interface Diagnostic {
  category: string;
  location: { path: string; start: { line: number } };
}

/** The lines the plugin reports in `file`, run alone (no other rule) from a configuration of its own. */
function reportedLines(plugin: string, file: string): number[] {
  const dir = mkdtempSync(join(tmpdir(), "lint-rules-"));
  try {
    const config = { plugins: [join(PROJECT, plugin)], linter: { rules: { recommended: false } } };
    writeFileSync(join(dir, "biome.json"), JSON.stringify(config));
    const biome = join(PROJECT, "node_modules/.bin/biome");
    const run = spawnSync(biome, ["lint", `--config-path=${dir}`, "--reporter=json", file], {
      cwd: PROJECT,
      encoding: "utf8",
    });
    let report: { diagnostics: Diagnostic[] };
    try {
      report = JSON.parse(run.stdout);
    } catch {
      throw new Error(`biome gave no report for ${file}:\n${run.stdout}${run.stderr}`);
    }
    const others = report.diagnostics.filter((diagnostic) => diagnostic.category !== "plugin");
    if (others.length > 0) throw new Error(`biome could not run ${plugin}:\n${JSON.stringify(others, null, 2)}`);
    return report.diagnostics.map((diagnostic) => diagnostic.location.start.line);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The lines of `file` marked `// planted`, 1-based as Biome counts them. */
function plantedLines(file: string): number[] {
  return readFileSync(join(PROJECT, file), "utf8")
    .split("\n")
    .flatMap((line, index) => (line.endsWith("// planted") ? [index + 1] : []));
}

/** Biome's plugins run only from a configured override: the check would pass on a rule src/ never runs. */
function configuredOnSrc(plugin: string): boolean {
  const { overrides } = JSON.parse(readFileSync(join(PROJECT, "biome.json"), "utf8")) as {
    overrides: { includes: string[]; plugins?: string[] }[];
  };
  return overrides.some(
    (override) => override.includes.includes("src/**") && override.plugins?.includes(`./${plugin}`),
  );
}

let failed = false;
for (const { plugin, planted, clean } of RULES) {
  const problems: string[] = [];
  if (!configuredOnSrc(plugin)) problems.push(`biome.json does not run it on src/**`);
  const expected = plantedLines(planted);
  const found = reportedLines(plugin, planted).sort((a, b) => a - b);
  if (expected.length === 0) problems.push(`${planted} plants nothing`);
  if (found.join() !== expected.join())
    problems.push(`${planted}: expected one report on each of lines ${expected.join(", ")}; got ${found.join(", ")}`);
  const cleanFound = reportedLines(plugin, clean);
  if (cleanFound.length > 0) problems.push(`${clean}: expected no report; got lines ${cleanFound.join(", ")}`);
  if (problems.length > 0) {
    failed = true;
    for (const problem of problems) console.error(`lint-rules: ${plugin}: ${problem}`);
  } else
    console.log(
      `lint-rules: ${plugin}: ${found.length} planted, ${found.length} reported, none in the clean fixture: ok`,
    );
}
if (failed) process.exit(1);
