// Shared Signals receiver credentials, on the local D1 that `npm start` serves (as the
// session:* commands), through src/services/ssf/receivers.ts. Each prints one JSON line.
//   npm run --silent ssf:receivers -- issue --name <name> --audience <aud>   the credential, shown once
//   npm run --silent ssf:receivers -- list                                    never a secret
//   npm run --silent ssf:receivers -- revoke --id <receiverId>                its streams are disabled
// Each takes `--env <env>` for a wrangler environment (e.g. `--env sharded`) and `--server <port|URL>`
// for the running server to work through, as the session:* commands (scripts/session.ts), and
// names on stderr the server it works through.

import { answerOnLocalProject } from "../dev/local-d1.ts";
import { openScope } from "../src/services/scope.ts";
import { issueReceiver, receiversOf, revokeReceiverCredential } from "../src/services/ssf/receivers.ts";
import { commandOf, parseOptions, SERVER_USAGE, serverOption } from "./options.ts";

const USAGE = `usage: npm run --silent ssf:receivers -- issue --name <name> --audience <aud> [--env <env>] [--server <port|URL>]
       npm run --silent ssf:receivers -- list [--env <env>] [--server <port|URL>]
       npm run --silent ssf:receivers -- revoke --id <receiverId> [--env <env>] [--server <port|URL>]
${SERVER_USAGE}`;

const { values, positionals } = parseOptions(
  process.argv.slice(2),
  {
    name: { type: "string" },
    audience: { type: "string" },
    id: { type: "string" },
    env: { type: "string", short: "e" },
    server: { type: "string" },
  },
  USAGE,
  true,
);
const command = commandOf(positionals, values, { issue: ["name", "audience"], list: [], revoke: ["id"] }, USAGE, () => [
  "env",
  "server",
]);

await answerOnLocalProject(values.env, serverOption(values.server, USAGE), async (project) => {
  const { shards } = openScope(project.env as unknown as Env);
  const now = new Date();
  if (command === "issue")
    return issueReceiver(shards, { name: values.name as string, audience: values.audience as string }, now);
  if (command === "list") return { receivers: await receiversOf(shards) };
  return revokeReceiverCredential(shards, values.id as string, now);
});
