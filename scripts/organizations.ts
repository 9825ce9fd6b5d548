// The directory of organizations (docs/organizations.md) on the local D1 that `npm start` serves,
// through the same code as the admin API (src/services/organizations/directory.ts); with
// `--remote`, `sync-policies` fills the deployed databases, as `shards:move --remote` reaches
// them (scripts/shards.ts). Each prints
// one JSON line, and first, on stderr, the server it works through, or that none serves the
// environment (the local files then).
//   npm run --silent org -- create --name <name> [--id <org id>]
//   npm run --silent org -- list [--limit <1..100>] [--cursor <org id>]
//   npm run --silent org -- show --id <org id>
//   npm run --silent org -- rename --id <org id> --name <name>
//   npm run --silent org -- remove --id <org id>
//   npm run --silent org -- sync-policies [--remote]   (every database's missing policy rows, from DB's)
// Each takes `--env <env>` for a wrangler environment, and `--server <port|URL>` for the running
// `npm start` or `npm run demo` to work through (its environment, unless --env is given).
import { answerOn, answerOnLocalProject } from "../dev/local-d1.ts";
import {
  createOrganization,
  fillPolicyRows,
  listOrganizations,
  readOrganization,
  removeOrganization,
  renameOrganization,
} from "../src/services/organizations/directory.ts";
import { openScope } from "../src/services/scope.ts";
import { commandOf, parseOptions, refuseServerWith, SERVER_USAGE, serverOption } from "./options.ts";

const USAGE = `usage: npm run --silent org -- create --name <name> [--id <org id>]
       npm run --silent org -- list [--limit <1..100>] [--cursor <org id>]
       npm run --silent org -- show --id <org id>
       npm run --silent org -- rename --id <org id> --name <name>
       npm run --silent org -- remove --id <org id>
       npm run --silent org -- sync-policies [--remote]
Each takes [--env <env>] [--server <port|URL>]; --remote: the deployed databases (after npx wrangler login), not the local ones.
${SERVER_USAGE}`;

const { values, positionals } = parseOptions(
  process.argv.slice(2),
  {
    name: { type: "string" },
    id: { type: "string" },
    limit: { type: "string" },
    cursor: { type: "string" },
    env: { type: "string", short: "e" },
    server: { type: "string" },
    remote: { type: "boolean" },
  },
  USAGE,
  true,
);
const command = commandOf(
  positionals,
  values,
  { create: ["name"], list: [], show: ["id"], rename: ["id", "name"], remove: ["id"], "sync-policies": [] },
  USAGE,
  (command) => [
    ...(({ create: ["id"], list: ["limit", "cursor"], "sync-policies": ["remote"] } as Record<string, string[]>)[
      command
    ] ?? []),
    "env",
    "server",
  ],
);
if (values.remote && values.server !== undefined) refuseServerWith("remote", USAGE);
const server = serverOption(values.server, USAGE);

/** What was asked of an organization the directory does not hold: the admin API's 404, as an error. */
function found<T>(result: T | null | false): T {
  if (result === null || result === false) throw new Error(`no organization ${values.id}`);
  return result;
}

async function act(project: { env: unknown }) {
  const scope = openScope(project.env as unknown as Env);
  const id = values.id as string;
  if (command === "create") return createOrganization(scope, { name: values.name, id: values.id });
  if (command === "list") {
    // A whole number as text is the number; anything else goes on, for the service's rule to refuse.
    const limit = values.limit !== undefined && /^\d{1,9}$/.test(values.limit) ? Number(values.limit) : values.limit;
    return listOrganizations(scope, { limit, cursor: values.cursor ?? null });
  }
  if (command === "show") return found(await readOrganization(scope, id));
  if (command === "rename") return found(await renameOrganization(scope, id, { name: values.name }));
  if (command === "sync-policies") return fillPolicyRows(scope);
  found(await removeOrganization(scope, id));
  return { removed: id };
}

if (values.remote) {
  // Imported here: wrangler loads only for the deployed databases.
  const { openDeployedDatabases } = await import("./shards.ts");
  await answerOn(() => openDeployedDatabases(values.env), act);
} else await answerOnLocalProject(values.env, server, act);
