// `npm run docs:check`: the documents must say what the project does, so CI fails when they
// drift. Checks, in every Markdown file git tracks (or would: new files count):
//   1. every relative link or image names an existing file, and every `#anchor` (same file or
//      `file.md#anchor`) a heading of its target, by GitHub's slug rules;
//   2. every `npm run <script>`, `npm start` and `npm test` names a script of package.json;
//   3. the README's commands are real: its ```sh block with the curl tour is run as written by
//      bash against a fresh `npm start` (its own port and state directory; `localhost:8787` is
//      the one thing pointed elsewhere), and each `curl` must get the status its comment gives
//      after `→`; any other ```sh block of the README may hold only npm commands (checked by 2);
//   4. docs/code-map.md has one row per file of src/ and no row for a file that is gone;
//   5. its data model gives each table of src/db/schema.ts a paragraph that names every column
//      of it and no column it lacks (the rule: test/architecture-checks.ts, `checkDataModel`);
//   6. every repository path written in backticks (`src/db/x.ts`, `test/`, …) exists, and every
//      backticked name shaped like a setting (`SESSION_TTL_SECONDS`) is one the code has;
//   7. ARCHITECTURE.md's table of statements per operation gives what test/statements.test.ts
//      measures (test/statement-counts.ts), with a row for each operation there;
//   8. its table of middleware names, in order, what src/http/app.ts mounts, then `onError`;
//   9. every page is within one size (the README within a screen's), and each page of docs/ with
//      two sections or more opens with a map that links each of them;
//  10. docs/configuration.md's settings table has a row per var of wrangler.toml's [vars], in its
//      order and with its default, and a row per secret src/ reads: the list the code reads.
// 5, 7, 8, 9 and 10 are functions of the text (test/architecture-checks.ts), which test/docs-check.test.ts
// also runs on a planted column, a wrong count, two middleware swapped, a grown page, a map
// missing a section and a settings table out of step.
//   npm run docs:check                  (all of it; the tour takes ~30 s)
//   npm run docs:check -- --no-tour     (all but 3: no server, well under a second)
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs, promisify } from "node:util";
import { parse as parseToml } from "smol-toml";
import { describeServer, runningServers } from "../../dev/dev-server.ts";
import { freePort, startNpmStart } from "../../dev/npm-start.ts";
import * as schema from "../../src/db/schema.ts";
import {
  checkDataModel,
  checkMap,
  checkMiddleware,
  checkSettings,
  checkSize,
  checkStatements,
  codeSpans,
  expand,
  headingIds,
  isMapped,
  pageBytes,
  prose,
  schemaTables,
  sectionOf,
} from "../architecture-checks.ts";
import { STATEMENTS } from "../statement-counts.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const { "no-tour": noTour } = parseArgs({ options: { "no-tour": { type: "boolean" } } }).values;
const problems: string[] = [];

/** The repository's files as git sees them, new ones included, deleted ones not. */
const repository = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], {
  cwd: ROOT,
  encoding: "utf8",
})
  .split("\n")
  .filter((file) => file !== "" && existsSync(path.join(ROOT, file)));
const files = repository.filter((file) => file.endsWith(".md"));
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

/** The ids of a document's headings, as anchors name them. */
const anchors = (text: string) => new Set(headingIds(text).map(({ id }) => id));

// 1. Links and anchors.
let links = 0;
for (const file of files) {
  for (const { line, number } of prose(read(file))) {
    const text = line.replace(/`[^`]*`/g, "code");
    const targets = [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g), ...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/g)];
    for (const [, target] of targets) {
      if (target === undefined || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      links++;
      const [where = "", anchor] = target.split("#");
      const resolved = where === "" ? file : path.join(path.dirname(file), decodeURIComponent(where));
      const at = `${file}:${number}: ${target}`;
      if (!existsSync(path.join(ROOT, resolved))) problems.push(`${at}: no file ${resolved}`);
      else if (anchor !== undefined && resolved.endsWith(".md") && !anchors(read(resolved)).has(anchor))
        problems.push(`${at}: no heading #${anchor} in ${resolved}`);
    }
  }
}

// 2. npm scripts named anywhere, code blocks included.
const scripts = new Set(Object.keys(JSON.parse(read("package.json")).scripts));
let named = 0;
for (const file of files) {
  read(file)
    .split("\n")
    .forEach((line, index) => {
      for (const [, run, builtin] of line.matchAll(/\bnpm (?:run (?:--silent |-s )?([\w:-]+)|(start|test)\b)/g)) {
        const script = run ?? builtin ?? "";
        named++;
        if (!scripts.has(script))
          problems.push(`${file}:${index + 1}: \`npm run ${script}\` is not a script of package.json`);
      }
    });
}

/** The lines under the heading `title` (test/architecture-checks.ts), or a problem. */
function section(file: string, title: string) {
  const found = sectionOf(read(file), title);
  if (!found) problems.push(`${file}: no heading "${title}"`);
  return found;
}

const ARCHITECTURE = "ARCHITECTURE.md";
const CODE_MAP = "docs/code-map.md";
const CONFIGURATION = "docs/configuration.md";

// 4. The code map: a table whose rows start with a backticked src/ path, one row per file.
// Generated by `npm run cf-typegen` from wrangler.toml, so nothing to explain file by file.
const GENERATED = new Set(["src/worker-configuration.d.ts"]);
const sources = repository.filter((file) => /^src\/.*\.ts$/.test(file) && !GENERATED.has(file));
const codeMap = section(CODE_MAP, "Code map");
/** `<line>:<path>` of the code map's rows naming a file that is gone, reported once, here. */
const mapRowsGone = new Set<string>();
if (codeMap) {
  const rows = new Map<string, number>();
  for (const { line, number } of codeMap.lines) {
    const entry = /^\|\s*`(src\/[^`]+)`\s*\|/.exec(line)?.[1];
    if (entry === undefined) continue;
    const twice = rows.get(entry);
    if (twice !== undefined)
      problems.push(`${CODE_MAP}:${number}: code map: \`${entry}\` has a row already (line ${twice})`);
    else rows.set(entry, number);
  }
  const unmapped = new Set(sources.filter((file) => !rows.has(file)));
  for (const [entry, number] of rows) {
    if (existsSync(path.join(ROOT, entry))) continue;
    mapRowsGone.add(`${number}:${entry}`);
    // A file moved: the one unmapped file of the same name is where it went.
    const moved = [...unmapped].filter((file) => path.basename(file) === path.basename(entry));
    if (moved.length === 1 && moved[0] !== undefined) {
      unmapped.delete(moved[0]);
      problems.push(`${CODE_MAP}:${number}: code map: \`${entry}\` is gone; moved to \`${moved[0]}\`? rename the row`);
    } else problems.push(`${CODE_MAP}:${number}: code map: \`${entry}\` does not exist: remove or rename the row`);
  }
  for (const file of unmapped)
    problems.push(
      `${CODE_MAP}:${codeMap.heading}: code map: no row for \`${file}\`: add "| \`${file}\` | <its job> |"`,
    );
}

// 5. The data model against the schema, table by table and column by column.
const tables = schemaTables(schema);
problems.push(...checkDataModel(ARCHITECTURE, read(ARCHITECTURE), tables));

// 7. The statements per operation against what test/statements.test.ts measures.
problems.push(...checkStatements(ARCHITECTURE, read(ARCHITECTURE), STATEMENTS));

// 8. The middleware, in the order src/http/app.ts mounts them.
problems.push(...checkMiddleware(ARCHITECTURE, read(ARCHITECTURE), read("src/http/app.ts")));

// 9. Every page within its size; each page of docs/ with two sections or more opens with a map of them.
for (const file of files) problems.push(...checkSize(file, read(file), pageBytes(file)));
const mapped = files.filter((file) => isMapped(file, read(file)));
for (const file of mapped) problems.push(...checkMap(file, read(file)));

// 6. Paths and settings named in backticks.
// A path starts with a folder git holds (src/, test/, docs/…): generated ones (dist/, .wrangler/)
// and package paths (hono/cookie) are not checked. `{a,b}` stands for each; `*`, `<…>` and `…`
// are patterns, not paths.
const folders = new Set(repository.filter((file) => file.includes("/")).map((file) => file.split("/")[0]));
// What the code has: wrangler's vars and binding names (every wrangler.toml), the members of
// Env (src/worker-configuration.d.ts and `declare global { interface Env … }` in src/), of the
// `…Vars` interfaces src/ reads secrets and vars through, the names src/domain/config.ts reads,
// the environment variables the tooling reads (`process.env.X`), and the constants the code
// declares (`ACTIVITY_WRITE_INTERVAL_MS`), which documents cite too.
const known = new Set<string>();
const collectToml = (value: unknown, key = ""): void => {
  if (Array.isArray(value)) for (const item of value) collectToml(item, key);
  else if (typeof value === "object" && value !== null) {
    for (const [name, inner] of Object.entries(value)) {
      if (key === "vars") known.add(name);
      collectToml(inner, name);
    }
  } else if ((key === "binding" || key === "name") && typeof value === "string") known.add(value);
};
const code = repository.filter((file) => file.endsWith(".ts"));
for (const file of repository.filter((file) => path.basename(file) === "wrangler.toml"))
  collectToml(parseToml(read(file)));
const members = (body: string) => [...body.matchAll(/^\s*([A-Z][A-Z0-9_]*)\??:/gm)].map(([, name]) => name ?? "");
for (const name of members(read("src/worker-configuration.d.ts"))) known.add(name);
/** The string members of src/'s `…Vars` and `Env` interfaces: the vars, and the secrets beside them. */
const readStrings = new Set<string>();
for (const file of code) {
  const text = read(file);
  if (file.startsWith("src/"))
    for (const [, body] of text.matchAll(/interface (?:Env|\w+Vars) \{([^}]*)\}/g)) {
      for (const name of members(body ?? "")) known.add(name);
      for (const [, name] of (body ?? "").matchAll(/^\s*([A-Z][A-Z0-9_]*)\??: string;/gm)) readStrings.add(name ?? "");
    }
  for (const [, name] of text.matchAll(/process\.env\.([A-Z][A-Z0-9_]*)/g)) known.add(name ?? "");
  for (const [, name] of text.matchAll(/\bconst ([A-Z][A-Z0-9_]*)\b/g)) known.add(name ?? "");
}
for (const [, name] of read("src/domain/config.ts").matchAll(/"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"/g))
  known.add(name ?? "");
// 10. The settings table against wrangler.toml's [vars] and the secrets src/ reads.
const vars = Object.entries((parseToml(read("wrangler.toml")) as { vars: Record<string, string> }).vars);
const secrets = [...readStrings].filter((name) => !vars.some(([v]) => v === name));
problems.push(...checkSettings(CONFIGURATION, read(CONFIGURATION), vars, secrets));

// Shaped like settings, but names of others: SQLite's result codes, as D1's errors quote them.
const NOT_SETTINGS = new Set(["SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_LOCKED"]);
let cited = 0;
for (const file of files) {
  for (const { line, number } of prose(read(file))) {
    for (const span of codeSpans(line)) {
      const folder = span.split("/")[0] ?? "";
      if (span.includes("/") && folders.has(folder) && !/[\s*<>…]/.test(span)) {
        for (const target of expand(span)) {
          cited++;
          if (existsSync(path.join(ROOT, target)) || (file === CODE_MAP && mapRowsGone.has(`${number}:${target}`)))
            continue;
          const same = repository.filter((other) => path.basename(other) === path.basename(target));
          const hint = same.length === 1 ? ` (now \`${same[0]}\`?)` : "";
          problems.push(`${file}:${number}: \`${target}\` does not exist${hint}`);
        }
      }
      // A name alone, or assigned (`SESSION_TTL_SECONDS=86400`).
      const setting = /^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=|$)/.exec(span)?.[1];
      if (setting === undefined || NOT_SETTINGS.has(setting)) continue;
      cited++;
      if (!known.has(setting))
        problems.push(`${file}:${number}: \`${setting}\` is no setting (var, binding, Env) or constant the code has`);
    }
  }
}

// 3. The README's commands.
// 3. The README's commands.
const shBlocks = [...read("README.md").matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map(([, body]) => body ?? "");
const tours = shBlocks.filter((block) => /^curl /m.test(block));
if (tours.length !== 1)
  problems.push(`README.md: expected one \`\`\`sh block with the curl tour, found ${tours.length}`);
for (const block of shBlocks.filter((block) => !tours.includes(block)))
  for (const line of block.split("\n")) {
    const command = line.replace(/#.*/, "").trim();
    for (const part of command === "" ? [] : command.split(/&&|;/).map((p) => p.trim()))
      if (!/^npm (install|ci|start|test|run [\w:-]+)(\s|$)/.test(part))
        problems.push(`README.md: \`${part}\` is not an npm command, and only the curl tour is run`);
  }

/** Each `curl` of the tour with the status after `→` in the comment above it. */
function expectedStatuses(tour: string): { curl: string; status: number }[] {
  const expected: { curl: string; status: number }[] = [];
  let comment: string | null = null;
  for (const line of tour.split("\n")) {
    if (line.startsWith("#")) comment = line;
    else if (line.startsWith("curl ")) {
      const status = comment === null ? undefined : /→\s*(\d{3})/.exec(comment)?.[1];
      if (status === undefined) problems.push(`README.md: no "→ <status>" comment above \`${line}\``);
      else expected.push({ curl: line, status: Number(status) });
      comment = null;
    }
  }
  return expected;
}

/** The tour, as a newcomer runs it: `npm start` on a port and state directory of its own. */
async function runTour(tour: string): Promise<void> {
  // The tour's commands name no server: one serving the top level beside the tour's would be
  // a second, and they would refuse.
  const serving = runningServers().filter((server) => server.env === null);
  if (serving.length > 0) {
    problems.push(
      `${serving.map(describeServer).join(" and ")} serves this checkout's top level: stop it, the tour starts its own`,
    );
    return;
  }
  const port = await freePort();
  const state = mkdtempSync(path.join(tmpdir(), "docs-check-"));
  try {
    const server = await startNpmStart(port, state);
    try {
      await checkTour(tour, port);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

/** Runs the tour against the server on `port`; each `curl` must get the status its comment gives. */
async function checkTour(tour: string, port: number): Promise<void> {
  const expected = expectedStatuses(tour);
  // curl also reports each status on stderr; the commands themselves run as written.
  const script = [
    "set -euo pipefail",
    `curl() { command curl --write-out '%{stderr}docs-check-status %{http_code}\\n' "$@"; }`,
    tour.replaceAll("localhost:8787", `127.0.0.1:${port}`),
  ].join("\n");
  const { stdout, stderr } = await promisify(execFile)("bash", ["-c", script], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 120_000,
  }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
    problems.push(`README.md: the tour failed: ${error.message}`);
    return { stdout: error.stdout ?? "", stderr: error.stderr ?? "" };
  });
  const got = [...stderr.matchAll(/^docs-check-status (\d{3})$/gm)].map(([, status]) => Number(status));
  expected.forEach(({ curl, status }, index) => {
    const actual = got[index];
    console.log(`  ${actual ?? "---"}  ${curl}`);
    if (actual !== status)
      problems.push(`README.md: \`${curl}\` answered ${actual ?? "nothing"}, the README says ${status}`);
  });
  if (got.length !== expected.length || problems.length > 0)
    console.error(`--- the tour's output ---\n${stdout}\n${stderr.replace(/^docs-check-status .*\n/gm, "")}`);
}

const [tour] = tours;
if (!noTour && tour !== undefined) await runTour(tour);

if (problems.length > 0) {
  for (const problem of problems) console.error(`docs:check: ${problem}`);
  process.exitCode = 1;
} else {
  console.log(
    `docs:check: ${files.length} Markdown files, ${links} relative links and anchors, ${named} npm commands, ${cited} paths and settings, the code map of ${sources.length} files, the data model of ${tables.size} tables, ${Object.keys(STATEMENTS).length} operations' statements, the middleware order, ${files.length} sizes, ${mapped.length} maps, ${vars.length} vars and ${secrets.length} secrets of the settings table${noTour ? "" : ", the README's tour"}: ok`,
  );
}
