// Fails when src/db/schema.ts has changes that no migration in migrations/ carries:
// generates from the schema into a copy of the folder and expects nothing new.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";

// Relative on purpose: drizzle-kit resolves `--out` against the project root.
mkdirSync("node_modules/.cache", { recursive: true });
const copy = mkdtempSync("node_modules/.cache/migrations-check-");
try {
  cpSync("migrations", copy, { recursive: true });
  const before = readdirSync(copy, { recursive: true }).length;
  execFileSync(
    "npx",
    ["drizzle-kit", "generate", "--dialect", "sqlite", "--schema", "./src/db/schema.ts", "--out", copy],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  const added = readdirSync(copy, { recursive: true }).length - before;
  if (added !== 0) {
    console.error("migrations/ is behind src/db/schema.ts: run `npm run db:generate` and commit the result.");
    process.exitCode = 1;
  } else {
    console.log("migrations/ matches src/db/schema.ts");
  }
} finally {
  rmSync(copy, { recursive: true, force: true });
}
