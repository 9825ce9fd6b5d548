// Issues a session on the local D1 that `npm start` serves, through the same code as
// SessionService.create. Usage:
//   npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>]
//                                       [--country <CC>] [--city <name>] [--region <region>] [--env <env>]
import { parseArgs } from "node:util";
import { getPlatformProxy } from "wrangler";
import { readConfig } from "../src/config.ts";
import { openShards } from "../src/db/shards.ts";
import { issueSession } from "../src/issue-session.ts";
import { migrate } from "./shards.ts";

const { values } = parseArgs({
  options: {
    user: { type: "string" },
    ip: { type: "string" },
    "user-agent": { type: "string" },
    ttl: { type: "string" },
    country: { type: "string" },
    city: { type: "string" },
    region: { type: "string" },
    env: { type: "string", short: "e" },
  },
});

if (values.user === undefined) {
  console.error(
    "usage: npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>] [--country <CC>] [--city <name>] [--region <region>] [--env <env>]",
  );
  process.exit(2);
}
if (values.ttl !== undefined && !/^\d+$/.test(values.ttl)) {
  console.error("--ttl must be a whole number of seconds");
  process.exit(2);
}

try {
  await migrate(values.env, "local");
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
const { env, dispose } = await getPlatformProxy<Env>({ environment: values.env });
try {
  const { id, token, expiresAt } = await issueSession(openShards(env), readConfig(env), {
    userId: values.user,
    ipAddress: values.ip ?? "127.0.0.1",
    userAgent: values["user-agent"] ?? "",
    country: values.country ?? null,
    city: values.city ?? null,
    region: values.region ?? null,
    ...(values.ttl === undefined ? {} : { ttlSeconds: Number(values.ttl) }),
  });
  console.log(JSON.stringify({ id, token, expiresAt }));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  await dispose();
}
