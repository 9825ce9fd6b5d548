// Operator commands on the local D1 that `npm start` serves, through the same code as the
// SessionService RPC (src/services/issue-session.ts, src/services/user-sessions.ts). Each prints one JSON line,
// and first, on stderr, the server it works through ("server: npm start at … (pid …, env …)"), or
// that none serves the environment (the local files then).
// Their events are written pending: the worker's minute cron sends them to the events queue and
// the Shared Signals streams, which this process cannot reach.
//   npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>]
//                                       [--country <CC>] [--city <name>] [--latitude <degrees> --longitude <degrees>]
//                                       [--region <region>] [--carrier cookie|bearer|both]
//                                       [--data <JSON object>] [--organization <org id>]
//                                       [--upstream <name> --upstream-subject <sub> [--upstream-sid <sid>]
//                                        [--upstream-session-expiry <epoch s>] [--upstream-auth-time <epoch s>]
//                                        [--upstream-acr <acr>] [--upstream-amr <method,method>]]
//   npm run --silent session:list -- --user <userId> [--region <region>]
//   npm run --silent session:end -- --user <userId> [--region <region>] [--except <sessionId>] [--reason <reason>]
//   npm run --silent session:end -- --session <sessionId> [--reason <reason>]
//   npm run --silent session:end -- --agent <agentId> [--reason <reason>]   (every support session of the agent)
//   npm run --silent session:end -- --organization <id> [--reason <reason>]   (every session of the organization)
//   npm run --silent session:support -- --user <userId> --agent <agentId> --reason <ticket> [--ttl <seconds>] [--region <region>]
// Each takes `--env <env>` for a wrangler environment (e.g. `--env sharded`), and `--server <port|URL>`
// for the running `npm start` or `npm run demo` to work through (its environment, unless --env is
// given): needed while two serve the environment; one that does not answer is refused, nothing done.

import { answerOnLocalProject } from "../dev/local-d1.ts";
import { SESSION_CARRIERS, type SessionCarrier } from "../src/domain/carrier.ts";
import { clientContext } from "../src/domain/client-context.ts";
import { callRefusalSentence } from "../src/domain/refusal.ts";
import type { SessionData } from "../src/domain/session-data.ts";
import { issueSession, openSupportSession } from "../src/services/issue-session.ts";
import { endOrganizationSessions } from "../src/services/organizations/sessions.ts";
import { openScope, type Scope } from "../src/services/scope.ts";
import { endSession, endSupportSessions, endUserSessions, listUserSessions } from "../src/services/user-sessions.ts";
import { parseOptions, refuse, SERVER_USAGE, serverOption } from "./options.ts";

const USAGE: Record<string, string> = {
  create:
    "session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>] [--country <CC>] [--city <name>] [--latitude <degrees> --longitude <degrees>] [--region <region>] [--carrier cookie|bearer|both] [--data <JSON object>] [--organization <org id>] [--upstream <name> --upstream-subject <sub> [--upstream-sid <sid>] [--upstream-session-expiry <epoch s>] [--upstream-auth-time <epoch s>] [--upstream-acr <acr>] [--upstream-amr <method,method>]] [--env <env>] [--server <port|URL>]",
  list: "session:list -- --user <userId> [--region <region>] [--env <env>] [--server <port|URL>]",
  end: "session:end -- --user <userId> [--region <region>] [--except <sessionId>] [--reason <reason>] | --session <sessionId> [--reason <reason>] | --agent <agentId> [--reason <reason>] | --organization <id> [--reason <reason>] [--env <env>] [--server <port|URL>]",
  support:
    "session:support -- --user <userId> --agent <agentId> --reason <ticket> [--ttl <seconds>] [--region <region>] [--env <env>] [--server <port|URL>]",
};

const usageOf = (command: string) =>
  `usage: npm run --silent ${USAGE[command] ?? Object.values(USAGE).join("\n       npm run --silent ")}\n${SERVER_USAGE}`;

function usage(command: string, problem: string): never {
  refuse(problem, usageOf(command));
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
  latitude: { type: "string" },
  longitude: { type: "string" },
  session: { type: "string" },
  except: { type: "string" },
  reason: { type: "string" },
  region: { type: "string" },
  carrier: { type: "string" },
  agent: { type: "string" },
  organization: { type: "string" },
  data: { type: "string" },
  upstream: { type: "string" },
  "upstream-subject": { type: "string" },
  "upstream-sid": { type: "string" },
  "upstream-session-expiry": { type: "string" },
  "upstream-auth-time": { type: "string" },
  "upstream-acr": { type: "string" },
  "upstream-amr": { type: "string" },
  env: { type: "string", short: "e" },
  server: { type: "string" },
} as const;

const { values } = parseOptions(rest, OPTIONS, usageOf(command));
const allowed: Record<string, string[]> = {
  create: [
    "user",
    "ip",
    "user-agent",
    "ttl",
    "country",
    "city",
    "latitude",
    "longitude",
    "region",
    "carrier",
    "data",
    "organization",
    "upstream",
    "upstream-subject",
    "upstream-sid",
    "upstream-session-expiry",
    "upstream-auth-time",
    "upstream-acr",
    "upstream-amr",
    "env",
    "server",
  ],
  list: ["user", "region", "env", "server"],
  end: ["user", "session", "agent", "organization", "except", "reason", "region", "env", "server"],
  support: ["user", "agent", "reason", "ttl", "region", "env", "server"],
};
const stray = Object.keys(values).filter((name) => !allowed[command]?.includes(name));
if (stray.length > 0) usage(command, `--${stray[0]} does not apply to session:${command}`);
const ending = [values.user, values.session, values.agent, values.organization].filter((value) => value !== undefined);
if (command === "end" && ending.length !== 1)
  usage(command, "give one of --user, --session, --agent or --organization");
if (
  command === "end" &&
  (values.agent ?? values.organization) !== undefined &&
  (values.except ?? values.region) !== undefined
)
  usage(command, "--except and --region go with --user");
if (command === "support" && (values.agent === undefined || values.reason === undefined))
  usage(command, "--agent and --reason are required");
if (command === "end" && values.session !== undefined && values.except !== undefined) {
  usage(command, "--except goes with --user");
}
if (command === "end" && values.session !== undefined && values.region !== undefined) {
  usage(command, "--region goes with --user: a session id names its database");
}
if (command !== "end" && values.user === undefined) usage(command, "--user is required");
if ((values.upstream === undefined) !== (values["upstream-subject"] === undefined))
  usage(command, "--upstream and --upstream-subject go together");
const upstreamMembers = ["sid", "session-expiry", "auth-time", "acr", "amr"] as const;
for (const member of upstreamMembers)
  if (values[`upstream-${member}`] !== undefined && values.upstream === undefined)
    usage(command, `--upstream-${member} goes with --upstream`);
// Epoch seconds as numbers; anything else is handed on, for the service's own rule to refuse.
const seconds = (value: string | undefined) =>
  value === undefined ? null : /^\d+$/.test(value) ? Number(value) : value;
// Where the sign-in was, as request.cf gives it: both or neither, read by the service's own rule.
const place = clientContext({ latitude: values.latitude, longitude: values.longitude });
if ((values.latitude ?? values.longitude) !== undefined && place.latitude === null)
  usage(command, "--latitude and --longitude go together, in degrees (e.g. --latitude 48.8566 --longitude 2.3522)");
if (values.ttl !== undefined && !/^\d+$/.test(values.ttl)) usage(command, "--ttl must be a whole number of seconds");
if (values.carrier !== undefined && !(SESSION_CARRIERS as readonly string[]).includes(values.carrier))
  usage(command, `--carrier must be one of ${SESSION_CARRIERS.join(", ")}`);
// The session's application data: parsed here, checked by the service as `create`'s `data` is.
let data: SessionData | undefined;
try {
  data = values.data === undefined ? undefined : JSON.parse(values.data);
} catch {
  usage(command, '--data must be JSON: an object, e.g. \'{"tenant":"acme"}\'');
}

const server = serverOption(values.server, usageOf(command));

/**
 * Every session of the organization, call after bounded call until none is left, or until a
 * call ends none (the rest sit in a bucket being moved: `moving`, run it again after the move).
 */
async function endWholeOrganization(scope: Scope, organizationId: string, reason: string) {
  let ended = 0;
  for (;;) {
    const answer = await endOrganizationSessions(scope, { organizationId, reason });
    if (answer === null) throw new RangeError("organizationId names no organization of this deployment");
    ended += answer.ended;
    if (answer.complete || answer.ended === 0) return { ended, moving: answer.moving, complete: answer.complete };
  }
}

await answerOnLocalProject(values.env, server, async (project) => {
  // Written pending, for the worker's minute cron to deliver (src/services/scope.ts `EntryPoint`).
  const scope = openScope(project.env as unknown as Env);
  // Operator actions are "admin" unless told otherwise.
  const reason = values.reason ?? "admin";
  if (command === "create") {
    const { id, token, expiresAt, newDevice, reportToken } = await issueSession(scope, {
      userId: values.user as string,
      ipAddress: values.ip ?? "127.0.0.1",
      userAgent: values["user-agent"] ?? "",
      country: values.country ?? null,
      city: values.city ?? null,
      latitude: place.latitude,
      longitude: place.longitude,
      region: values.region ?? null,
      carrier: (values.carrier ?? null) as SessionCarrier | null,
      ...(data === undefined ? {} : { data }),
      organization: values.organization ?? null,
      ...(values.ttl === undefined ? {} : { ttlSeconds: Number(values.ttl) }),
      ...(values.upstream === undefined
        ? {}
        : {
            upstream: {
              provider: values.upstream,
              subject: values["upstream-subject"] as string,
              sid: values["upstream-sid"] ?? null,
              session_expiry: seconds(values["upstream-session-expiry"]) as number | null,
              auth_time: seconds(values["upstream-auth-time"]) as number | null,
              acr: values["upstream-acr"] ?? null,
              amr: values["upstream-amr"]?.split(",") ?? null,
            },
          }),
    });
    // A new device's report token is printed for the operator's own message: the queue's copy
    // is sent by the cron, which never has it in clear.
    return { id, token, expiresAt, newDevice, ...(reportToken === undefined ? {} : { reportToken }) };
  }
  if (command === "support") {
    const opened = await openSupportSession(scope, {
      userId: values.user as string,
      agentId: values.agent as string,
      reason: values.reason as string,
      region: values.region ?? null,
      ipAddress: "127.0.0.1",
      ...(values.ttl === undefined ? {} : { ttlSeconds: Number(values.ttl) }),
    });
    // This entry point's answer to a refusal: the RPC's error, with its sentence.
    if (typeof opened === "string") throw new RangeError(callRefusalSentence(opened));
    const { id, token, expiresAt } = opened;
    return { id, token, expiresAt };
  }
  if (command === "list")
    return { sessions: await listUserSessions(scope, values.user as string, values.region ?? null) };
  if (values.session !== undefined) return endSession(scope, { sessionId: values.session, reason });
  if (values.agent !== undefined) return endSupportSessions(scope, { agentId: values.agent, reason });
  if (values.organization !== undefined) return endWholeOrganization(scope, values.organization, reason);
  return endUserSessions(scope, {
    userId: values.user as string,
    exceptSessionId: values.except ?? null,
    reason,
    region: values.region ?? null,
  });
});
