import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import architecture from "../ARCHITECTURE.md?raw";
import integrating from "../docs/integrating.md?raw";
import readme from "../README.md?raw";
import * as schema from "../src/db/schema.ts";
import app from "../src/http/app.ts?raw";
import {
  checkDataModel,
  checkMap,
  checkMiddleware,
  checkSettings,
  checkSize,
  checkStatements,
  PAGE_BYTES,
  README_BYTES,
  schemaTables,
} from "./architecture-checks.ts";
import { STATEMENTS } from "./statement-counts.ts";

// `npm run docs:check` (test/checks/check-docs.ts) holds ARCHITECTURE.md's data model to the
// schema, its statements table to what test/statements.test.ts measures and its middleware
// table to src/http/app.ts, with the functions of test/architecture-checks.ts. Here they run on
// the real document, schema and app, then on a planted column, a planted count and two
// middleware swapped: each drift must fail, naming what drifted. So too the pages' size, a
// guide's map and the settings table, on a grown page, a map missing a section and a table out
// of step with wrangler.toml.

const FILE = "ARCHITECTURE.md";
const lineOf = (text: string, start: string) => text.split("\n").findIndex((line) => line.startsWith(start)) + 1;

describe("docs:check on ARCHITECTURE.md", () => {
  it("holds today: the data model names every column of every table, the statements table every count, the middleware table the order", () => {
    expect(checkDataModel(FILE, architecture, schemaTables(schema))).toEqual([]);
    expect(checkStatements(FILE, architecture, STATEMENTS)).toEqual([]);
    expect(checkMiddleware(FILE, architecture, app)).toEqual([]);
  });

  it("fails on middleware that src/http/app.ts mounts in another order than the table's", () => {
    // The input bounds moved up, before no-store.
    const outer = "const routes = new Hono<AppEnv>().use(requestLog).use(securityHeaders);\n";
    const bounds = "routes.use(inputLimits);\n";
    const swapped = app.replace(bounds, "").replace(outer, outer + bounds);
    expect(swapped).not.toBe(app);
    const table = "requestLog, securityHeaders";
    expect(checkMiddleware(FILE, architecture, swapped)).toEqual([
      `${FILE}:${lineOf(architecture, "| 3 |")}: middleware: the table gives ${table}, noStore, inputLimits, Mount.use, refuseOtherMethods, onError; src/http/app.ts mounts ${table}, inputLimits, noStore, Mount.use, refuseOtherMethods, onError`,
    ]);
  });

  it("fails on a mount's own middleware moved before the input limits", () => {
    const bounds = "routes.use(inputLimits);\n";
    const own = `for (const { path, use } of mounts) routes.use(\`\${path}/*\`, ...use);\n`;
    const moved = app.replace(own, "").replace(bounds, own + bounds);
    expect(moved).not.toBe(app);
    const table = "requestLog, securityHeaders, noStore";
    expect(checkMiddleware(FILE, architecture, moved)).toEqual([
      `${FILE}:${lineOf(architecture, "| 4 |")}: middleware: the table gives ${table}, inputLimits, Mount.use, refuseOtherMethods, onError; src/http/app.ts mounts ${table}, Mount.use, inputLimits, refuseOtherMethods, onError`,
    ]);
  });

  it("fails on a column added to the schema that the data model does not name", () => {
    // bucket_moves as src/db/schema.ts declares it, and one column more.
    const bucketMoves = sqliteTable("bucket_moves", {
      bucket: text("bucket").primaryKey(),
      state: text("state").notNull(),
      binding: text("binding").notNull(),
      updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
      plantedAt: integer("planted_at", { mode: "timestamp_ms" }),
    });
    expect(checkDataModel(FILE, architecture, schemaTables({ ...schema, bucketMoves }))).toEqual([
      `${FILE}:${lineOf(architecture, "**`bucket_moves`**")}: data model: \`bucket_moves\` has the column \`planted_at\` in src/db/schema.ts, which its paragraph does not name`,
    ]);
  });

  it("fails on a column the data model names that the table does not have, and on a table it does not describe", () => {
    const renamed = architecture.replace("`binding`, `updated_at`. Empty", "`binding`, `moved_at`. Empty");
    const at = `${FILE}:${lineOf(architecture, "**`bucket_moves`**")}: data model:`;
    expect(checkDataModel(FILE, renamed, schemaTables(schema))).toEqual([
      `${at} \`moved_at\` is no column of \`bucket_moves\` in src/db/schema.ts`,
      `${at} \`bucket_moves\` has the column \`updated_at\` in src/db/schema.ts, which its paragraph does not name`,
    ]);
    const unbolded = architecture.replace("**`bucket_moves`**", "`bucket_moves`");
    expect(checkDataModel(FILE, unbolded, schemaTables(schema))).toEqual([
      `${FILE}:${lineOf(architecture, "## 2. Data model")}: data model: no paragraph for the table \`bucket_moves\` of src/db/schema.ts (one starting **\`bucket_moves\`**)`,
    ]);
  });

  it("fails on a wrong count in the statements table", () => {
    const row = "| `GET /auth/sessions` |";
    const [judged, notJudged] = STATEMENTS["GET /auth/sessions"];
    const planted = architecture
      .split("\n")
      .map((line) =>
        line.startsWith(row) ? line.replace(/\| \d+ \/ \d+ \|$/, `| ${judged} / ${notJudged + 1} |`) : line,
      )
      .join("\n");
    expect(planted).not.toBe(architecture);
    expect(checkStatements(FILE, planted, STATEMENTS)).toEqual([
      `${FILE}:${lineOf(architecture, row)}: statements: \`GET /auth/sessions\` says ${judged} / ${notJudged + 1}, test/statements.test.ts measures ${judged} / ${notJudged}`,
    ]);
  });
});

describe("docs:check on the pages' sizes, the guides' maps and the settings table", () => {
  it("fails on a page grown past the one limit, and on a README past a screen's worth", () => {
    // The limits, stated here, not read from the check's own declaration.
    expect([PAGE_BYTES, README_BYTES]).toEqual([25_600, 12_500]);
    const grown = (text: string, bytes: number) => text + "x".repeat(bytes - new TextEncoder().encode(text).length);
    expect(checkSize("docs/integrating.md", grown(integrating, 25_600), PAGE_BYTES)).toEqual([]);
    expect(checkSize("docs/integrating.md", grown(integrating, 25_601), PAGE_BYTES)).toEqual([
      "docs/integrating.md: 25601 bytes, over its 25600: move depth one link away, or cut",
    ]);
    expect(checkSize("README.md", grown(readme, 12_501), README_BYTES)).toEqual([
      "README.md: 12501 bytes, over its 12500: move depth one link away, or cut",
    ]);
  });

  it("fails on a map that leaves a section out", () => {
    expect(checkMap("docs/integrating.md", integrating)).toEqual([]);
    const unmapped = integrating
      .split("\n")
      .filter((line) => !line.includes("](#events-queue)"))
      .join("\n");
    expect(unmapped).not.toBe(integrating);
    expect(checkMap("docs/integrating.md", unmapped)).toEqual([
      `docs/integrating.md:${lineOf(unmapped, "## Events queue")}: map: the opening does not link this section (#events-queue)`,
    ]);
  });

  const SETTINGS = "docs/configuration.md";
  const vars = [
    ["SESSION_COOKIE_NAME", "__Host-session"],
    ["SESSION_TTL_SECONDS", "2592000"],
  ] as const;
  const settings = [
    "## Settings",
    "",
    "| Var | Default | Meaning |",
    "|---|---|---|",
    "| `SESSION_COOKIE_NAME` | `__Host-session` | The cookie |",
    "| `SESSION_TTL_SECONDS` | `2592000` (30 days) | A session's lifetime |",
    "",
    "| Secret | Meaning |",
    "|---|---|",
    "| `ADMIN_KEYS` | The admin API's keys |",
  ].join("\n");

  it("holds on a table with each var in order, its default, and each secret", () => {
    expect(checkSettings(SETTINGS, settings, vars, ["ADMIN_KEYS"])).toEqual([]);
  });

  it("fails on a var wrangler.toml has that the table lacks, on a wrong default, and on a secret unlisted or gone", () => {
    const planted = [...vars, ["SESSION_PLANTED", ""]] as const;
    expect(checkSettings(SETTINGS, settings, planted, ["ADMIN_KEYS"])).toEqual([
      `${SETTINGS}:1: settings: the Var table lists SESSION_COOKIE_NAME, SESSION_TTL_SECONDS; wrangler.toml's [vars] are SESSION_COOKIE_NAME, SESSION_TTL_SECONDS, SESSION_PLANTED`,
    ]);
    const wrongDefault = settings.replace("| `2592000` (30 days) |", "| `86400` (a day) |");
    expect(checkSettings(SETTINGS, wrongDefault, vars, ["ADMIN_KEYS"])).toEqual([
      `${SETTINGS}:6: settings: \`SESSION_TTL_SECONDS\` defaults to \`2592000\` in wrangler.toml; the table says \`86400\` (a day)`,
    ]);
    expect(checkSettings(SETTINGS, settings, vars, ["ADMIN_KEYS", "SSF_SIGNING_KEYS"])).toEqual([
      `${SETTINGS}:1: settings: no row for the secret \`SSF_SIGNING_KEYS\`, which src/ reads`,
    ]);
    expect(checkSettings(SETTINGS, settings, vars, [])).toEqual([
      `${SETTINGS}:1: settings: \`ADMIN_KEYS\` is no secret src/ reads`,
    ]);
  });
});
