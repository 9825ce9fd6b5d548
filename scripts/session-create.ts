// Issues a session on the local D1 that `npm start` serves, through the same code as
// SessionService.create. Usage:
//   npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>]
//                                       [--country <CC>] [--city <name>]
import { parseArgs } from "node:util";
import { getPlatformProxy } from "wrangler";
import { readConfig } from "../src/config.ts";
import { openDatabase } from "../src/db/queries.ts";
import { issueSession } from "../src/issue-session.ts";

const { values } = parseArgs({
  options: {
    user: { type: "string" },
    ip: { type: "string" },
    "user-agent": { type: "string" },
    ttl: { type: "string" },
    country: { type: "string" },
    city: { type: "string" },
  },
});

if (values.user === undefined) {
  console.error(
    "usage: npm run --silent session:create -- --user <userId> [--ip <ip>] [--user-agent <ua>] [--ttl <seconds>] [--country <CC>] [--city <name>]",
  );
  process.exit(2);
}
if (values.ttl !== undefined && !/^\d+$/.test(values.ttl)) {
  console.error("--ttl must be a whole number of seconds");
  process.exit(2);
}

const { env, dispose } = await getPlatformProxy<Env>();
try {
  const { id, token, expiresAt } = await issueSession(openDatabase(env.DB), readConfig(env), {
    userId: values.user,
    ipAddress: values.ip ?? "127.0.0.1",
    userAgent: values["user-agent"] ?? "",
    country: values.country ?? null,
    city: values.city ?? null,
    ...(values.ttl === undefined ? {} : { ttlSeconds: Number(values.ttl) }),
  });
  console.log(JSON.stringify({ id, token, expiresAt }));
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  await dispose();
}
