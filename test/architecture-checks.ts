import { is } from "drizzle-orm";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";

// What `npm run docs:check` (test/checks/check-docs.ts) holds the documents to, as functions
// of their text, so that test/docs-check.test.ts runs them on planted text and a planted
// schema too: ARCHITECTURE.md's data model against the tables of src/db/schema.ts, its table of
// statements per operation against what test/statements.test.ts measures, and its table of
// middleware against the text of src/http/app.ts; the front doors' sizes; the guides' maps. Plain
// functions: no file is read here, so they run under Node (the checker) and in the Workers
// runtime (the test) alike. Each answers its problems, `<file>:<line>: <what is wrong>`; none: it holds.

/** Lines outside fenced code blocks, with their line numbers. */
export function prose(text: string): { line: string; number: number }[] {
  const lines: { line: string; number: number }[] = [];
  let fence: string | null = null;
  text.split("\n").forEach((line, index) => {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker && (fence === null || marker === fence)) fence = fence === null ? marker : null;
    else if (fence === null) lines.push({ line, number: index + 1 });
  });
  return lines;
}

/** The spans of inline code on a line of prose. */
export const codeSpans = (line: string) => [...line.matchAll(/`([^`]+)`/g)].map(([, span]) => span ?? "");

/** `{a,b}` stands for each: `seen_{os,asn}` is `seen_os` and `seen_asn`. */
export const expand = (text: string): string[] => {
  const brace = /\{([^{}]*)\}/.exec(text);
  if (!brace) return [text];
  return (brace[1] ?? "").split(",").flatMap((part) => expand(text.replace(brace[0], part)));
};

export interface Section {
  /** The heading's line number. */
  heading: number;
  lines: { line: string; number: number }[];
}

/** The lines under the heading `title`, numbered or not (`## 6. Code map`), to the next heading as high. */
export function sectionOf(text: string, title: string): Section | null {
  const lines = prose(text);
  const start = lines.findIndex(({ line }) => new RegExp(`^#{1,6}\\s+(?:\\d+\\.\\s+)?${title}\\s*$`).test(line));
  const at = lines[start];
  if (at === undefined) return null;
  const level = /^#+/.exec(at.line)?.[0].length ?? 1;
  const after = lines.slice(start + 1);
  const end = after.findIndex(({ line }) => (/^(#+)\s/.exec(line)?.[1]?.length ?? 7) <= level);
  return { heading: at.number, lines: end === -1 ? after : after.slice(0, end) };
}

/** A table as the schema declares it: its SQL name, its columns' and its indexes' names. */
export interface SchemaTable {
  columns: readonly string[];
  indexes: readonly string[];
}

/** The tables of a schema module (`import * as schema from "src/db/schema.ts"`), by SQL name, as Drizzle builds them. */
export function schemaTables(schema: Record<string, unknown>): Map<string, SchemaTable> {
  const tables = new Map<string, SchemaTable>();
  for (const value of Object.values(schema)) {
    if (!is(value, SQLiteTable)) continue;
    const { name, columns, indexes } = getTableConfig(value);
    tables.set(name, {
      columns: columns.map((column) => column.name),
      indexes: indexes.map((index) => index.config.name),
    });
  }
  return tables;
}

/** Lowercase snake_case with at least one `_`: what a column looks like, and a value (`frozen`, `push`) does not. */
const COLUMN_LIKE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/;
/** A table's paragraph starts with its name, bold and backticked, as a paragraph or a list item. */
const TABLE_START = /^(?:[-*]\s+)?\*\*`([^`]+)`\*\*/;

/**
 * The section "Data model" against the schema. The rule:
 *  - every table of the schema has one paragraph, which starts with its name bold and in
 *    backticks (**`sessions`**, or `- **`ssf_streams`**` as a list item) and runs to the
 *    next blank line, list item or heading; no such paragraph names a table the schema lacks;
 *  - the paragraph's words are those of its inline code spans, `{a,b}` expanded, but spans
 *    holding a `/` (paths, routes): the runs of letters, digits and `_`, kept whole when
 *    dotted (`sessions.device_key`, `writes.ts`);
 *  - every column of the table is one of those words (`(user_id, expires_at)` names two);
 *  - every word that looks like a column (lowercase snake_case with a `_`, so `frozen` or
 *    `EVENT_TYPES` do not) is a column or an index of the table, or a table's name;
 *    `<table>.<column>` must be a column of that table, and names it.
 */
export function checkDataModel(file: string, text: string, tables: ReadonlyMap<string, SchemaTable>): string[] {
  const section = sectionOf(text, "Data model");
  if (!section) return [`${file}: no heading "Data model"`];
  const problems: string[] = [];
  const paragraphs: { table: string; number: number; words: string[] }[] = [];
  let open: (typeof paragraphs)[number] | null = null;
  for (const { line, number } of section.lines) {
    const table = TABLE_START.exec(line)?.[1];
    if (table !== undefined) {
      open = { table, number, words: [] };
      paragraphs.push(open);
    } else if (line.trim() === "" || /^\s*[-*]\s/.test(line)) open = null;
    if (!open) continue;
    for (const span of codeSpans(line)) {
      if (span.includes("/")) continue;
      for (const expanded of expand(span)) open.words.push(...(expanded.match(/\w+(?:\.\w+)*/g) ?? []));
    }
  }
  const described = new Map<string, number>();
  for (const { table, number, words } of paragraphs) {
    const at = `${file}:${number}: data model:`;
    const schema = tables.get(table);
    if (!schema) {
      problems.push(`${at} **\`${table}\`** is no table of src/db/schema.ts`);
      continue;
    }
    const first = described.get(table);
    if (first !== undefined) problems.push(`${at} \`${table}\` is described already (line ${first})`);
    else described.set(table, number);
    const named = new Set<string>();
    for (const word of words) {
      const [owner, column, ...rest] = word.split(".");
      if (column !== undefined && rest.length === 0 && owner !== undefined && tables.has(owner)) {
        if (!tables.get(owner)?.columns.includes(column))
          problems.push(`${at} \`${word}\`: \`${owner}\` has no column \`${column}\` in src/db/schema.ts`);
        else if (owner === table) named.add(column);
        continue;
      }
      if (column !== undefined) continue;
      named.add(word);
      if (
        COLUMN_LIKE.test(word) &&
        !schema.columns.includes(word) &&
        !schema.indexes.includes(word) &&
        !tables.has(word)
      )
        problems.push(`${at} \`${word}\` is no column of \`${table}\` in src/db/schema.ts`);
    }
    for (const column of schema.columns)
      if (!named.has(column))
        problems.push(
          `${at} \`${table}\` has the column \`${column}\` in src/db/schema.ts, which its paragraph does not name`,
        );
  }
  for (const table of tables.keys())
    if (!described.has(table))
      problems.push(
        `${file}:${section.heading}: data model: no paragraph for the table \`${table}\` of src/db/schema.ts (one starting **\`${table}\`**)`,
      );
  return problems;
}

/**
 * The middleware table of the section "Request path" against `app`, the text of
 * src/http/app.ts: the names in backticks of the rows' Middleware cells (`| 1 | request log
 * (\`requestLog\`) |`), in order, must be the middleware it mounts (`.use(…, name)`, each where it is
 * first mounted; a mount's own, spread from its declaration, as `Mount.use`), then `onError`.
 */
export function checkMiddleware(file: string, text: string, app: string): string[] {
  const section = sectionOf(text, "Request path");
  if (!section) return [`${file}: no heading "Request path"`];
  const documented: { name: string; number: number }[] = [];
  for (const { line, number } of section.lines) {
    const cells = line.split("|").map((cell) => cell.trim());
    if (!line.startsWith("|") || !/^\d+$/.test(cells[1] ?? "")) continue;
    for (const name of codeSpans(cells[2] ?? "")) if (/^[\w.]+$/.test(name)) documented.push({ name, number });
  }
  // A mount's own middleware is spread from its declaration (`...use`): the table names it `Mount.use`.
  const mounted = [
    ...new Set(
      [...app.matchAll(/\.use\((?:[^()]*?,\s*)?(\.\.\.)?(\w+)\)/g)].map(([, spread, name]) =>
        spread ? `Mount.${name}` : (name ?? ""),
      ),
    ),
  ];
  if (app.includes(".onError(")) mounted.push("onError");
  const differs = mounted.findIndex((name, index) => documented[index]?.name !== name);
  if (differs === -1 && documented.length === mounted.length) return [];
  const at = documented[differs === -1 ? mounted.length : differs]?.number ?? section.heading;
  return [
    `${file}:${at}: middleware: the table gives ${documented.map(({ name }) => name).join(", ")}; src/http/app.ts mounts ${mounted.join(", ")}`,
  ];
}

/**
 * The statements per operation, in the section "Request path": the rows whose first cell names
 * operations in backticks and whose last says `<judged> / <not judged>`, against `measured`
 * (test/statement-counts.ts), with a row for each operation there and none for another.
 */
export function checkStatements(
  file: string,
  text: string,
  measured: Readonly<Record<string, readonly [number, number]>>,
): string[] {
  const section = sectionOf(text, "Request path");
  if (!section) return [`${file}: no heading "Request path"`];
  const problems: string[] = [];
  const given = new Map<string, { counts: string; number: number }>();
  for (const { line, number } of section.lines) {
    const cells = line.split("|").map((cell) => cell.trim());
    const counts = /^\d+ \/ \d+$/.exec(cells.at(-2) ?? "")?.[0];
    if (!line.startsWith("|") || counts === undefined) continue;
    for (const operation of codeSpans(cells[1] ?? "")) given.set(operation, { counts, number });
  }
  for (const [operation, [judged, notJudged]] of Object.entries(measured)) {
    const row = given.get(operation);
    const counts = `${judged} / ${notJudged}`;
    if (!row) problems.push(`${file}:${section.heading}: statements: no row for \`${operation}\` (${counts})`);
    else if (row.counts !== counts)
      problems.push(
        `${file}:${row.number}: statements: \`${operation}\` says ${row.counts}, test/statements.test.ts measures ${counts}`,
      );
    given.delete(operation);
  }
  for (const [operation, { number }] of given)
    problems.push(`${file}:${number}: statements: \`${operation}\` is not measured by test/statements.test.ts`);
  return problems;
}

/** GitHub's heading ids: lowercase, punctuation but `-` and `_` dropped, spaces to `-`, repeats `-1`, `-2`… */
export function headingIds(text: string): { id: string; level: number; number: number }[] {
  const seen = new Map<string, number>();
  const ids: { id: string; level: number; number: number }[] = [];
  for (const { line, number } of prose(text)) {
    const [, hashes = "", heading] = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line) ?? [];
    if (heading === undefined) continue;
    const plain = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/`/g, "");
    const slug = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    ids.push({ id: count === 0 ? slug : `${slug}-${count}`, level: hashes.length, number });
  }
  return ids;
}

/**
 * The most bytes of any Markdown page: what a reader takes in at one sitting. Depth goes one link
 * away, to a page of its own, or to git history. The README, the front door of them all, is held
 * to a screen's worth with its two commands.
 */
export const PAGE_BYTES = 25_600;
export const README_BYTES = 12_500;

/** The most bytes `file` may have. */
export const pageBytes = (file: string) => (file === "README.md" ? README_BYTES : PAGE_BYTES);

/** The document within `most` bytes. */
export function checkSize(file: string, text: string, most: number): string[] {
  const bytes = new TextEncoder().encode(text).length;
  return bytes <= most ? [] : [`${file}: ${bytes} bytes, over its ${most}: move depth one link away, or cut`];
}

/** A page of docs/ with two sections or more, which opens with a map of them. */
export const isMapped = (file: string, text: string) =>
  file.startsWith("docs/") && headingIds(text).filter(({ level }) => level === 2).length >= 2;

/** Before its first section, the document links each of its sections (`##`), so a reader finds theirs in one screen. */
export function checkMap(file: string, text: string): string[] {
  const sections = headingIds(text).filter(({ level }) => level === 2);
  const first = sections[0]?.number ?? Number.POSITIVE_INFINITY;
  const opening = prose(text)
    .filter(({ number }) => number < first)
    .map(({ line }) => line)
    .join("\n");
  const linked = new Set([...opening.matchAll(/\]\(#([^)\s]+)\)/g)].map(([, anchor]) => anchor));
  return sections
    .filter(({ id }) => !linked.has(id))
    .map(({ id, number }) => `${file}:${number}: map: the opening does not link this section (#${id})`);
}

/**
 * The settings table (docs/configuration.md, "Settings"): a row per var of wrangler.toml's
 * `[vars]`, in its order, whose default cell starts with the var's value (`empty` for ""), and a
 * row per secret `src/` reads, so the table is the list the code reads, not a second one.
 * `vars`: the top-level `[vars]`, in order; `secrets`: the names `src/` reads beside them.
 */
export function checkSettings(
  file: string,
  text: string,
  vars: readonly (readonly [string, string])[],
  secrets: readonly string[],
): string[] {
  const section = sectionOf(text, "Settings");
  if (!section) return [`${file}: no heading "Settings"`];
  const rows: { name: string; cells: string[]; number: number; table: string }[] = [];
  let table = "";
  for (const { line, number } of section.lines) {
    const header = /^\|\s*(\w+)\s*\|/.exec(line)?.[1];
    const name = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/.exec(line)?.[1];
    if (name !== undefined) rows.push({ name, cells: line.split("|").map((cell) => cell.trim()), number, table });
    else if (header !== undefined) table = header;
  }
  const problems: string[] = [];
  const at = (number: number) => `${file}:${number}: settings:`;
  const varRows = rows.filter((row) => row.table === "Var");
  const listed = varRows.map((row) => row.name).join(", ");
  const wanted = vars.map(([name]) => name).join(", ");
  if (listed !== wanted)
    problems.push(`${at(section.heading)} the Var table lists ${listed}; wrangler.toml's [vars] are ${wanted}`);
  const defaults = new Map(vars);
  for (const { name, cells, number } of varRows) {
    const value = defaults.get(name);
    const cell = cells[2] ?? "";
    if (value === undefined) continue;
    if (value === "" ? !cell.startsWith("empty") : !cell.startsWith(`\`${value}\``))
      problems.push(
        `${at(number)} \`${name}\` defaults to ${value === "" ? "empty" : `\`${value}\``} in wrangler.toml; the table says ${cell}`,
      );
  }
  const secretRows = rows.filter((row) => row.table === "Secret").map((row) => row.name);
  for (const name of secrets.filter((name) => !secretRows.includes(name)))
    problems.push(`${at(section.heading)} no row for the secret \`${name}\`, which src/ reads`);
  for (const name of secretRows.filter((name) => !secrets.includes(name)))
    problems.push(`${at(section.heading)} \`${name}\` is no secret src/ reads`);
  return problems;
}
