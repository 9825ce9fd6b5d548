import { defineConfig } from "drizzle-kit";

// drizzle-kit only generates SQL here; wrangler applies it (same `migrations` folder).
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
  out: "./migrations",
});
