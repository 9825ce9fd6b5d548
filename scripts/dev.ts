// `npm start` / `npm run dev`: applies migrations to every local database of the chosen
// environment, then runs `wrangler dev` with the same arguments, e.g.
//   npm start -- --port 8788          npm start -- --env sharded
import { spawn } from "node:child_process";
import { envOf, migrate } from "./shards.ts";

const args = process.argv.slice(2);
try {
  await migrate(envOf(args), "local");
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
const dev = spawn("npx", ["wrangler", "dev", ...args], { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => dev.kill(signal));
dev.on("close", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
