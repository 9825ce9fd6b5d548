import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import architecture from "../ARCHITECTURE.md?raw";
import benchmarks from "../BENCHMARKS.md?raw";
import integrating from "../docs/integrating.md?raw";
import operating from "../docs/operating.md?raw";
import readme from "../README.md?raw";
import * as schema from "../src/db/schema.ts";
import app from "../src/http/app.ts?raw";
import {
  checkDataModel,
  checkMap,
  checkMiddleware,
  checkSize,
  checkStatements,
  DOCUMENT_SIZES,
  MAPPED,
  schemaTables,
} from "./architecture-checks.ts";
import { STATEMENTS } from "./statement-counts.ts";

// `npm run docs:check` (test/checks/check-docs.ts) holds ARCHITECTURE.md's data model to the
// schema, its statements table to what test/statements.test.ts measures and its middleware
// table to src/http/app.ts, with the functions of test/architecture-checks.ts. Here they run on
// the real document, schema and app, then on a planted column, a planted count and two
// middleware swapped: each drift must fail, naming what drifted. So too the front doors' sizes
// and the guides' maps, on a grown README and a map missing a section.

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
    const bounds = "routes.use(inputBounds);\n";
    const swapped = app.replace(bounds, "").replace(outer, outer + bounds);
    expect(swapped).not.toBe(app);
    const table = "requestLog, securityHeaders";
    expect(checkMiddleware(FILE, architecture, swapped)).toEqual([
      `${FILE}:${lineOf(architecture, "| 3 |")}: middleware: the table gives ${table}, noStore, inputBounds, refuseOtherMethods, onError; src/http/app.ts mounts ${table}, inputBounds, noStore, refuseOtherMethods, onError`,
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

describe("docs:check on the front doors' sizes and the guides' maps", () => {
  const documents: Record<string, string> = {
    "README.md": readme,
    "ARCHITECTURE.md": architecture,
    "BENCHMARKS.md": benchmarks,
    "docs/integrating.md": integrating,
    "docs/operating.md": operating,
  };
  const text = (file: string) => documents[file] ?? "";

  it("holds today: each front door within its size, each guide opening with a map of its sections", () => {
    for (const [file, most] of Object.entries(DOCUMENT_SIZES)) expect(checkSize(file, text(file), most)).toEqual([]);
    for (const file of MAPPED) expect(checkMap(file, text(file))).toEqual([]);
  });

  it("fails on a README grown past its size", () => {
    const most = DOCUMENT_SIZES["README.md"] as number;
    const grown = readme + "x".repeat(most + 1 - new TextEncoder().encode(readme).length);
    expect(checkSize("README.md", grown, most)).toEqual([
      `README.md: ${most + 1} bytes, over its ${most}: move depth one link away, or cut`,
    ]);
  });

  it("fails on a map that leaves a section out", () => {
    const unmapped = integrating
      .split("\n")
      .filter((line) => !line.includes("](#events-queue)"))
      .join("\n");
    expect(unmapped).not.toBe(integrating);
    expect(checkMap("docs/integrating.md", unmapped)).toEqual([
      `docs/integrating.md:${lineOf(unmapped, "## Events queue")}: map: the opening does not link this section (#events-queue)`,
    ]);
  });
});
