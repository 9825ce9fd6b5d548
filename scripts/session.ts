// Operator commands on the local D1 that `npm start` serves, through the same code as the
// SessionService RPC (src/issue-session.ts, src/user-sessions.ts). Each prints one JSON line.
//   npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>]
//                                       [--country <CC>] [--city <name>]
//   npm run --silent session:list -- --user <userId>
//   npm run --silent session:end -- --user <userId> [--except <sessionId>] [--reason <reason>]
//   npm run --silent session:end -- --session <sessionId> [--reason <reason>]
import { parseArgs } from "node:util";
import { readConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/queries.ts";
import { issueSession } from "../src/issue-session.ts";
import { endOneSession, endSessionsOfUser, listSessionsOfUser } from "../src/user-sessions.ts";
import { openLocalProject } from "./local-d1.ts";

const USAGE: Record<string, string> = {
  create:
    "session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>] [--country <CC>] [--city <name>]",
  list: "session:list -- --user <userId>",
  end: "session:end -- --user <userId> [--except <sessionId>] [--reason <reason>] | --session <sessionId> [--reason <reason>]",
};

function usage(command: string, problem: string): never {
  console.error(
    `${problem}\nusage: npm run --silent ${USAGE[command] ?? Object.values(USAGE).join("\n       npm run --silent ")}`,
  );
  process.exit(2);
}

const [command = "", ...rest] = process.argv.slice(2);
if (!(command in USAGE)) usage(command, `unknown command "${command}"`);

let values: Record<string, string | undefined>;
try {
  values = parseArgs({
    args: rest,
    options: {
      user: { type: "string" },
      ip: { type: "string" },
      "user-agent": { type: "string" },
      ttl: { type: "string" },
      country: { type: "string" },
      city: { type: "string" },
      session: { type: "string" },
      except: { type: "string" },
      reason: { type: "string" },
    },
  }).values;
} catch (error) {
  usage(command, error instanceof Error ? error.message : String(error));
}
const allowed: Record<string, string[]> = {
  create: ["user", "ip", "user-agent", "ttl", "country", "city"],
  list: ["user"],
  end: ["user", "session", "except", "reason"],
};
const stray = Object.keys(values).filter((name) => !allowed[command]?.includes(name));
if (stray.length > 0) usage(command, `--${stray[0]} does not apply to session:${command}`);
if (command === "end" && (values.user === undefined) === (values.session === undefined)) {
  usage(command, "give either --user or --session");
}
if (command === "end" && values.session !== undefined && values.except !== undefined) {
  usage(command, "--except goes with --user");
}
if (command !== "end" && values.user === undefined) usage(command, "--user is required");
if (values.ttl !== undefined && !/^\d+$/.test(values.ttl)) usage(command, "--ttl must be a whole number of seconds");

let project: ReturnType<typeof openLocalProject>;
try {
  project = openLocalProject();
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
try {
  const db = openDatabase(project.env.DB);
  const config = readConfig(project.env);
  // Operator actions are "admin" unless told otherwise.
  const reason = values.reason ?? "admin";
  let answer: unknown;
  if (command === "create") {
    const { id, token, expiresAt } = await issueSession(db, config, {
      userId: values.user as string,
      ipAddress: values.ip ?? "127.0.0.1",
      userAgent: values["user-agent"] ?? "",
      country: values.country ?? null,
      city: values.city ?? null,
      ...(values.ttl === undefined ? {} : { ttlSeconds: Number(values.ttl) }),
    });
    answer = { id, token, expiresAt };
  } else if (command === "list") {
    answer = { sessions: await listSessionsOfUser(db, config, values.user as string) };
  } else if (values.session !== undefined) {
    answer = await endOneSession(db, config, { sessionId: values.session, reason }, null);
  } else {
    answer = await endSessionsOfUser(
      db,
      config,
      { userId: values.user as string, exceptSessionId: values.except ?? null, reason },
      null,
    );
  }
  console.log(JSON.stringify(answer));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  project.close();
}
