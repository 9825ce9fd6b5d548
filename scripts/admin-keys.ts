// The admin API's keys (src/domain/admin-keys.ts), kept in a file of what the secret ADMIN_KEYS
// holds: each key's id, name, scopes, creation time and its secret's SHA-256, never the key. A new
// key is printed once, here; nothing else ever shows it. The file is read and written only by
// this user (mode 600); deploy it with `npx wrangler secret put ADMIN_KEYS < <file>`, after each
// change (a revoked key stops working once the secret is updated). `npm start` serves the keys of
// the default file, read when it starts.
//   npm run --silent admin:keys -- create --name <name> --scope <scope> [--scope <scope>…] [--organization <org id>] [--file <path>]
//     --organization: the key reaches that organization alone (docs/organizations.md)
//   npm run --silent admin:keys -- list [--file <path>] [--env <env>] [--server <port|URL>]
//     with each key's last use on the local project (without --env: the environment of the server
//     --server names, else the one the running `npm start`s serve, else the top level); it names
//     on stderr the server it reads through
//   npm run --silent admin:keys -- revoke --id <id> [--file <path>]
// The default file is .wrangler/admin-keys.json (or ADMIN_KEYS_FILE), the one `npm start` reads.
import { existsSync, readFileSync } from "node:fs";
import { ADMIN_KEYS_FILE, writeAdminKeys } from "../dev/admin-key-file.ts";
import { servedEnv } from "../dev/dev-server.ts";
import { answerOnLocalProject } from "../dev/local-d1.ts";
import {
  ADMIN_SCOPES,
  type AdminKey,
  type AdminScope,
  isKeyName,
  newAdminKey,
  readAdminKeys,
} from "../src/domain/admin-keys.ts";
import { isOrganizationId, ORGANIZATION_ID_RULE } from "../src/domain/organizations/organization.ts";
import { keyUsesOf } from "../src/services/admin-key-uses.ts";
import { openScope } from "../src/services/scope.ts";
import { commandOf, parseOptions, refuse, SERVER_USAGE, serverOption } from "./options.ts";

const USAGE = `usage: npm run --silent admin:keys -- create --name <name> --scope <${ADMIN_SCOPES.join("|")}> [--scope …] [--organization <org id>] [--file <path>]
       npm run --silent admin:keys -- list [--file <path>] [--env <env>] [--server <port|URL>]
       npm run --silent admin:keys -- revoke --id <id> [--file <path>]
${SERVER_USAGE}`;

const { values, positionals } = parseOptions(
  process.argv.slice(2),
  {
    name: { type: "string" },
    scope: { type: "string", multiple: true },
    organization: { type: "string" },
    id: { type: "string" },
    file: { type: "string" },
    env: { type: "string", short: "e" },
    server: { type: "string" },
  },
  USAGE,
  true,
);
function usage(problem: string): never {
  refuse(problem, USAGE);
}
const command = commandOf(
  positionals,
  values,
  { create: ["name", "scope"], list: [], revoke: ["id"] },
  USAGE,
  (command) =>
    command === "list" ? ["file", "env", "server"] : command === "create" ? ["file", "organization"] : ["file"],
);

const file = values.file ?? ADMIN_KEYS_FILE;
function readKeys(): AdminKey[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, "utf8");
  try {
    // The worker's own rules: a file it would refuse is refused here, before anything is made of it.
    return [...(readAdminKeys({ ADMIN_KEYS: text }) ?? new Map()).values()];
  } catch (error) {
    usage(`${file} is not a key file: ${error instanceof Error ? error.message : error}`);
  }
}
const keys = readKeys();
const save = (next: AdminKey[]) => writeAdminKeys(file, `${JSON.stringify(next, null, 2)}\n`);

if (command === "create") {
  const name = values.name as string;
  if (!isKeyName(name)) usage("--name must be 1 to 64 printable characters, no leading or trailing space");
  if (keys.some((key) => key.name === name)) usage(`a key named ${name} exists: revoke it, or choose another name`);
  const scopes = [...new Set(values.scope as string[])];
  const unknown = scopes.find((scope) => !(ADMIN_SCOPES as readonly string[]).includes(scope));
  if (unknown !== undefined) usage(`--scope ${unknown}: each scope must be one of ${ADMIN_SCOPES.join(", ")}`);
  const { organization } = values;
  if (organization !== undefined && !isOrganizationId(organization))
    usage(`--organization must be ${ORGANIZATION_ID_RULE}`);
  const made = await newAdminKey(name, scopes as AdminScope[], new Date());
  const stored = organization === undefined ? made.stored : { ...made.stored, organization };
  save([...keys, stored]);
  console.log(
    JSON.stringify({
      id: stored.id,
      key: made.key,
      name,
      scopes: stored.scopes,
      ...(organization === undefined ? {} : { organization }),
      createdAt: stored.createdAt,
      file,
    }),
  );
} else if (command === "list") {
  // Each key's last use as the local project recorded it. Without --env, in the environment of
  // the server --server names, or else the running `npm start` serves: it serves the default key
  // file whatever its environment, so its keys' uses are there, not in the top level's databases
  // (which would be migrated for nothing).
  const server = serverOption(values.server, USAGE);
  await answerOnLocalProject(values.env ?? (server ? undefined : servedEnv()), server, async (project) => {
    const uses = await keyUsesOf(openScope(project.env as unknown as Env).shards);
    const listed = keys.map(({ secretHash: _, ...key }) => ({ ...key, lastUsedAt: uses.get(key.id) ?? null }));
    return { keys: listed, file };
  });
} else {
  const id = values.id as string;
  if (!keys.some((key) => key.id === id)) usage(`no key ${id} in ${file}`);
  save(keys.filter((key) => key.id !== id));
  console.log(JSON.stringify({ revoked: id, file }));
}
