// `npm run docs:check`: the documents must say what the project does, so CI fails when they
// drift. Checks, in every Markdown file git tracks (or would: new files count):
//   1. every relative link or image names an existing file, and every `#anchor` (same file or
//      `file.md#anchor`) a heading of its target, by GitHub's slug rules;
//   2. every `npm run <script>`, `npm start` and `npm test` names a script of package.json;
//   3. the README's commands are real: its ```sh block with the curl tour is run as written by
//      bash against a fresh `npm start` (its own port and state directory; `localhost:8787` is
//      the one thing pointed elsewhere), and each `curl` must get the status its comment gives
//      after `→`; any other ```sh block of the README may hold only npm commands (checked by 2).
//   npm run docs:check                  (all of it; the tour takes ~30 s)
//   npm run docs:check -- --no-tour     (1 and 2 only: no server)
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs, promisify } from "node:util";
import { DEV_SERVER_FILE, type DevServer } from "./dev-server.ts";
import { freePort, startNpmStart } from "./npm-start.ts";

const ROOT = path.join(import.meta.dirname, "..");
const { "no-tour": noTour } = parseArgs({ options: { "no-tour": { type: "boolean" } } }).values;
const problems: string[] = [];

const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "*.md"], {
  cwd: ROOT,
  encoding: "utf8",
})
  .split("\n")
  .filter((file) => file !== "" && existsSync(path.join(ROOT, file)));
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

/** Lines outside fenced code blocks, with their line numbers. */
function prose(text: string): { line: string; number: number }[] {
  const lines: { line: string; number: number }[] = [];
  let fence: string | null = null;
  text.split("\n").forEach((line, index) => {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker && (fence === null || marker === fence)) fence = fence === null ? marker : null;
    else if (fence === null) lines.push({ line, number: index + 1 });
  });
  return lines;
}

/** GitHub's heading ids: lowercase, punctuation but `-` and `_` dropped, spaces to `-`, repeats `-1`, `-2`… */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const ids = new Set<string>();
  for (const { line } of prose(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const plain = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/`/g, "");
    const slug = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    ids.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return ids;
}

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
  if (existsSync(DEV_SERVER_FILE)) {
    const { pid } = JSON.parse(readFileSync(DEV_SERVER_FILE, "utf8")) as DevServer;
    try {
      process.kill(pid, 0);
      problems.push(`an \`npm start\` (pid ${pid}) is serving this checkout: stop it, the tour starts its own`);
      return;
    } catch {}
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
    `docs:check: ${files.length} Markdown files, ${links} relative links and anchors, ${named} npm commands${noTour ? "" : ", the README's tour"}: ok`,
  );
}
