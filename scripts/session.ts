// Operator commands on the local D1 that `npm start` serves, through the same code as the
// SessionService RPC (src/services/issue-session.ts, src/services/user-sessions.ts). Each prints one JSON line.
// Their events are written pending: the worker's minute cron sends them to the events queue and
// the Shared Signals streams, which this process cannot reach.
//   npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>]
//                                       [--country <CC>] [--city <name>] [--region <region>]
//   npm run --silent session:list -- --user <userId> [--region <region>]
//   npm run --silent session:end -- --user <userId> [--region <region>] [--except <sessionId>] [--reason <reason>]
//   npm run --silent session:end -- --session <sessionId> [--reason <reason>]
// Each takes `--env <env>` for a wrangler environment (e.g. `--env sharded`).
import { parseArgs } from "node:util";
import { issueSession } from "../src/services/issue-session.ts";
import { openScope } from "../src/services/scope.ts";
import { endSession, endUserSessions, listUserSessions } from "../src/services/user-sessions.ts";
import { answerOnLocalProject } from "./local-d1.ts";

const USAGE: Record<string, string> = {
  create:
    "session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>] [--country <CC>] [--city <name>] [--region <region>] [--env <env>]",
  list: "session:list -- --user <userId> [--region <region>] [--env <env>]",
  end: "session:end -- --user <userId> [--region <region>] [--except <sessionId>] [--reason <reason>] | --session <sessionId> [--reason <reason>] [--env <env>]",
};

function usage(command: string, problem: string): never {
  console.error(
    `${problem}\nusage: npm run --silent ${USAGE[command] ?? Object.values(USAGE).join("\n       npm run --silent ")}`,
  );
  process.exit(2);
}

const [command = "", ...rest] = process.argv.slice(2);
if (!(command in USAGE)) usage(command, `unknown command "${command}"`);

const OPTIONS = {
  user: { type: "string" },
  ip: { type: "string" },
  "user-agent": { type: "string" },
  ttl: { type: "string" },
  country: { type: "string" },
  city: { type: "string" },
  session: { type: "string" },
  except: { type: "string" },
  reason: { type: "string" },
  region: { type: "string" },
  env: { type: "string", short: "e" },
} as const;

/**
 * `--except -PPO…` as `--except=-PPO…`: a value may begin with "-" (the session ids of one
 * user in 64 do, their bucket's first character being "-"), which parseArgs would take for an
 * option. Only a word that is itself one of the options (`--env`, `--env=x`, `-e`) is not a
 * value, so a forgotten one is still refused.
 */
function valuesMayStartWithDash(args: string[]): string[] {
  const flags = Object.keys(OPTIONS).map((name) => `--${name}`);
  const isOption = (word: string) =>
    word === "-e" || flags.some((flag) => word === flag || word.startsWith(`${flag}=`));
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const [arg, next] = [args[i] as string, args[i + 1]];
    if (flags.includes(arg) && next?.startsWith("-") && !isOption(next)) {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

let values: Record<string, string | undefined>;
try {
  values = parseArgs({ args: valuesMayStartWithDash(rest), options: OPTIONS }).values;
} catch (error) {
  usage(command, error instanceof Error ? error.message : String(error));
}
const allowed: Record<string, string[]> = {
  create: ["user", "ip", "user-agent", "ttl", "country", "city", "region", "env"],
  list: ["user", "region", "env"],
  end: ["user", "session", "except", "reason", "region", "env"],
};
const stray = Object.keys(values).filter((name) => !allowed[command]?.includes(name));
if (stray.length > 0) usage(command, `--${stray[0]} does not apply to session:${command}`);
if (command === "end" && (values.user === undefined) === (values.session === undefined)) {
  usage(command, "give either --user or --session");
}
if (command === "end" && values.session !== undefined && values.except !== undefined) {
  usage(command, "--except goes with --user");
}
if (command === "end" && values.session !== undefined && values.region !== undefined) {
  usage(command, "--region goes with --user: a session id names its database");
}
if (command !== "end" && values.user === undefined) usage(command, "--user is required");
if (values.ttl !== undefined && !/^\d+$/.test(values.ttl)) usage(command, "--ttl must be a whole number of seconds");

await answerOnLocalProject(values.env, async (project) => {
  // Written pending, for the worker's minute cron to deliver (src/services/scope.ts `Door`).
  const scope = openScope(project.env as unknown as Env);
  // Operator actions are "admin" unless told otherwise.
  const reason = values.reason ?? "admin";
  if (command === "create") {
    const { id, token, expiresAt } = await issueSession(scope, {
      userId: values.user as string,
      ipAddress: values.ip ?? "127.0.0.1",
      userAgent: values["user-agent"] ?? "",
      country: values.country ?? null,
      city: values.city ?? null,
      region: values.region ?? null,
      ...(values.ttl === undefined ? {} : { ttlSeconds: Number(values.ttl) }),
    });
    return { id, token, expiresAt };
  }
  if (command === "list")
    return { sessions: await listUserSessions(scope, values.user as string, values.region ?? null) };
  if (values.session !== undefined) return endSession(scope, { sessionId: values.session, reason });
  return endUserSessions(scope, {
    userId: values.user as string,
    exceptSessionId: values.except ?? null,
    reason,
    region: values.region ?? null,
  });
});
