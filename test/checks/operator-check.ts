// `npm run check:operator`: the operator's commands, run as docs/operator-commands.md says while
// `npm start -- --env sharded` serves users, must never make the service fail. First, before
// any `npm start`, a newcomer's first `admin:keys -- create` and `list`, on a key file whose
// directory does not exist yet (a fresh clone has no .wrangler/), and `org -- sync-policies
// --remote` given `--server`, and `org -- create --remote`, refused. Then it starts the
// real `npm start` (its own state directory and port), signs users in, and while clients
// list, delete, log out and log out everywhere over HTTP, runs `shards:move` of buckets
// 0-127 (DB to DB_2) and the `session:*`, `db:status` and `db:migrate:local` commands. Then
// it restarts the server with the printed SHARDS (a local "deploy") and runs
// `shards:move --finish` under the same load; checks which server a command talks to (it names
// it; `--server` where nothing, or a stranger, listens is refused with nothing written; with a
// second `npm start -- --env sharded` beside the first, a command naming neither is refused and
// `--server` reaches each); serves `npm run demo` over https beside it (the
// top-level commands must reach the demo's own database through its gateway, trusting its
// certificate alone); and last moves buckets 128-255 with no client running. After each
// phase every token the clients were told is live must authenticate, and every ended one
// must not. Prints one JSON report and its figures (the longest a user saw 503
// `moving`, buckets moved per second idle and under load: measured, never bounded); exits 1 on
// any 5xx other than 503 `moving`, a session lost or revived, or a command on the wrong server. The clients drive 18 users
// (`--users <n>`); `--buckets <n>` moves 0 to n-1 under load and as many after them without:
// `npm run check:operator -- --users 480 --buckets 512` is a heavier run, for the figures.
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { type DevServer, describeServer, runningServers } from "../../dev/dev-server.ts";
import { gatewayCall, type LocalProject, openLocalProject } from "../../dev/local-d1.ts";
import { freePort, type NpmStart, startNpmStart } from "../../dev/npm-start.ts";
import { parseOptions, refuse } from "../../scripts/options.ts";
import { bucketOf, openShards } from "../../src/db/shards.ts";
import { BucketMoving } from "../../src/domain/errors.ts";
import { bucketKey } from "../../src/domain/token.ts";
import { issueSession } from "../../src/services/issue-session.ts";
import { openScope } from "../../src/services/scope.ts";
import { issueReceiver, receiversOf } from "../../src/services/ssf/receivers.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const ENV = ["--env", "sharded"];
const USAGE = "usage: npm run check:operator [-- --users <1-1000, default 18>] [--buckets <1-512, default 128>]";
const { values: options } = parseOptions(
  process.argv.slice(2),
  { users: { type: "string" }, buckets: { type: "string" } },
  USAGE,
);
function count(name: "users" | "buckets", fallback: number, max: number): number {
  const value = Number(options[name] ?? fallback);
  if (!Number.isInteger(value) || value < 1 || value > max)
    refuse(`--${name} must be a whole number from 1 to ${max}`, USAGE);
  return value;
}
const buckets = count("buckets", 128, 512);
/** The range moved from DB (0-1023) to DB_2: as in docs/databases.md, smaller to keep the check short. */
const MOVED = { first: 0, last: buckets - 1 };
/** The range moved last, with no client running: the move's own pace, to compare with the loaded one. */
const MOVED_IDLE = { first: buckets, last: 2 * buckets - 1 };
/** The users the clients drive: two in three in the range moved under load. */
const USERS = count("users", 18, 1000);
const USERS_MOVED = Math.ceil((USERS * 2) / 3);
const USERS_STAYING = USERS - USERS_MOVED;
const SESSIONS_PER_USER = 3;
/** Each phase's load runs at least this long, and until its commands are done. */
const MIN_LOAD_MS = 5_000;
const CHROME =
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

const run = promisify(execFile);

let commandsRetried = 0;

/**
 * An operator command, as docs/operator-commands.md writes it: `npm run --silent <script> -- <args>`. One
 * refused because its user's bucket is frozen mid-move changed nothing and says to retry in
 * a second: so it is.
 */
async function command(script: string, args: string[]): Promise<string> {
  for (;;) {
    try {
      const child = run("npm", ["run", "--silent", script, "--", ...args, ...ENV], {
        cwd: ROOT,
        maxBuffer: 1 << 24,
      });
      // The move's progress lines, as the operator sees them.
      if (script === "shards:move") child.child.stderr?.on("data", (chunk) => process.stderr.write(chunk));
      return (await child).stdout;
    } catch (error) {
      if (!String((error as { stderr?: string }).stderr).includes("Retry in a second")) throw error;
      commandsRetried++;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** A command given bad arguments: it must exit 2; answers the first line of what it said. */
async function refusedCommand(script: string, args: string[]): Promise<string> {
  try {
    await run("npm", ["run", "--silent", script, "--", ...args, ...ENV], { cwd: ROOT });
  } catch (error) {
    const { code, stderr } = error as { code?: number; stderr?: string };
    if (code === 2) return String(stderr).split("\n")[0] as string;
    throw error;
  }
  throw new Error(`${script} -- ${args.join(" ")} was not refused`);
}

/** A client address of its own per request, so that ended tokens never trip the failure limit. */
function randomIp(): string {
  const word = () => Math.floor(Math.random() * 0x10000).toString(16);
  return `2001:db8:${word()}:${word()}::${word()}`;
}

const progress = (line: string) => process.stderr.write(`operator check: ${line}\n`);

function startServer(port: number, state: string, shards?: string): Promise<NpmStart> {
  return startNpmStart(port, state, [...ENV, ...(shards === undefined ? [] : ["--var", `SHARDS:${shards}`])]);
}

interface Session {
  id: string;
  token: string;
  user: string;
  /** What the clients were told: live until an answer said it ended. */
  live: boolean;
}

const sessions = new Map<string, Session>();
const stats = { requests: 0, fiveXx: 0, moving: 0, unexpected: [] as string[] };
/** Per user, since when its requests have answered 503 moving; the longest such window. */
const movingSince = new Map<string, number>();
let longestMovingMs = 0;
const movingWindows: number[] = [];

/**
 * The running server's databases, opened once per server: opening reads its vars and checks
 * its migrations, a few gateway calls that a sign-in each would add to the load measured.
 */
let opened: Promise<LocalProject> | null = null;
const projectOfServer = () => {
  opened ??= openLocalProject("sharded");
  return opened;
};

/** The login flow's sign-in, through the same gateway and code as `session:create`. */
async function signIn(user: string): Promise<void> {
  const project = await projectOfServer();
  for (;;) {
    try {
      const { id, token } = await issueSession(
        { ...openScope(project.env as unknown as Env), outbox: null },
        {
          userId: user,
          userAgent: CHROME,
          ipAddress: "203.0.113.9",
        },
      );
      sessions.set(id, { id, token, user, live: true });
      return;
    } catch (error) {
      if (!(error instanceof BucketMoving)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** The operator's `session:create`. */
async function create(user: string): Promise<void> {
  const answer = JSON.parse(
    await command("session:create", ["--user", user, "--user-agent", CHROME, "--ip", "203.0.113.9"]),
  ) as { id: string; token: string };
  sessions.set(answer.id, { ...answer, user, live: true });
}

function liveOf(user: string): Session[] {
  return [...sessions.values()].filter((session) => session.user === user && session.live);
}

async function request(base: string, session: Session, method: string, path: string): Promise<Response> {
  stats.requests++;
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${session.token}`, "CF-Connecting-IP": randomIp(), "User-Agent": CHROME },
  });
  if (response.status >= 500) {
    const body = (await response.clone().json()) as { code?: string };
    if (response.status === 503 && body.code === "moving") {
      stats.moving++;
      if (!movingSince.has(session.user)) movingSince.set(session.user, Date.now());
    } else {
      stats.fiveXx++;
      stats.unexpected.push(`${method} ${path} ${response.status} ${body.code}`);
    }
  } else {
    const since = movingSince.get(session.user);
    if (since !== undefined) {
      movingWindows.push(Date.now() - since);
      longestMovingMs = Math.max(longestMovingMs, Date.now() - since);
      movingSince.delete(session.user);
    }
  }
  return response;
}

/**
 * One user's client, in a cycle: list, delete another session, log out others, log out this
 * one, log out everywhere; signed in again (session:create) whenever fewer than two are live.
 */
async function client(base: string, user: string, until: () => boolean): Promise<void> {
  for (let step = 0; !until(); step++) {
    while (liveOf(user).length < 2) await signIn(user);
    const [me, other] = liveOf(user) as [Session, Session];
    const list = await request(base, me, "GET", "/auth/sessions");
    if (list.status === 401) stats.unexpected.push(`GET /auth/sessions 401 for a live session of ${user}`);
    const action = step % 8;
    let ended: Session[] = [];
    let response: Response | null = null;
    if (action === 1) {
      response = await request(base, me, "DELETE", `/auth/sessions/${other.id}`);
      ended = [other];
    } else if (action === 3) {
      response = await request(base, me, "DELETE", "/auth/logout?scope=others");
      ended = liveOf(user).filter((session) => session !== me);
    } else if (action === 5) {
      response = await request(base, me, "POST", "/auth/logout");
      ended = [me];
    } else if (action === 7) {
      response = await request(base, me, "DELETE", "/auth/logout");
      ended = liveOf(user);
    }
    if (response?.status === 200) for (const session of ended) session.live = false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The operator's `session:*` commands on users the clients do not drive. */
async function sessionCommands(users: string[]): Promise<number> {
  let count = 0;
  for (const user of users) {
    await create(user);
    await command("session:list", ["--user", user]);
    const [first] = liveOf(user);
    if (first) {
      await command("session:end", ["--session", first.id, "--reason", "admin"]);
      first.live = false;
    }
    await command("session:end", ["--user", user, "--reason", "admin"]);
    for (const session of liveOf(user)) session.live = false;
    count += 4;
  }
  return count;
}

/** Runs `work` while every driven user's client loops; tops users up to SESSIONS_PER_USER first. */
async function underLoad<T>(base: string, users: string[], work: () => Promise<T>): Promise<T> {
  for (const user of users) while (liveOf(user).length < SESSIONS_PER_USER) await signIn(user);
  let done = false;
  const started = Date.now();
  const until = () => done && Date.now() - started > MIN_LOAD_MS;
  const clients = users.map((user) => client(base, user, until));
  try {
    return await work();
  } finally {
    done = true;
    await Promise.all(clients);
  }
}

/** Every session still live authenticates; every ended one is refused. */
async function verify(base: string, phase: string) {
  let live = 0;
  let ended = 0;
  const wrong: string[] = [];
  for (const session of sessions.values()) {
    const status = (
      await fetch(`${base}/auth/sessions`, {
        headers: { Authorization: `Bearer ${session.token}`, "CF-Connecting-IP": randomIp(), "User-Agent": CHROME },
      })
    ).status;
    if (session.live) live++;
    else ended++;
    const expected = session.live ? 200 : 401;
    if (status !== expected) wrong.push(`${session.id}: ${status}, expected ${expected}`);
  }
  return { phase, live, ended, wrong };
}

/**
 * Ids that begin with "-" (one in 64: base64url) given as the docs show, `--session <id>` and
 * `--id <id>`: taken as values, not options. Each is first given with a stray option, which must
 * be refused and change nothing. The session joins those verify() checks afterwards.
 */
async function dashIds(): Promise<Record<string, unknown>> {
  const [user] = await usersWhere(1, (bucket) => bucketKey({ region: "default", bucket }).startsWith("-"));
  await signIn(user as string);
  const [session] = liveOf(user as string) as [Session];
  const sessionRefused = await refusedCommand("session:end", ["--session", session.id, "--except", session.id]);
  const sessionEnded = JSON.parse(await command("session:end", ["--session", session.id]));
  if (sessionEnded.ended) session.live = false;

  const project = await projectOfServer();
  const shards = openShards(project.env as unknown as Env);
  let receiver: { id: string };
  do receiver = await issueReceiver(shards, { name: "dash", audience: "https://dash.example" }, new Date());
  while (!receiver.id.startsWith("-"));
  const receiverRefused = await refusedCommand("ssf:receivers", ["revoke", "--id", receiver.id, "--name", "x"]);
  const untouched = (await receiversOf(shards)).find(({ id }) => id === receiver.id)?.revokedAt === null;
  const receiverRevoked = JSON.parse(await command("ssf:receivers", ["revoke", "--id", receiver.id]));
  const answers = { sessionRefused, sessionEnded, receiverRefused, untouched, receiverRevoked };
  const expected = {
    sessionRefused: "--except goes with --user",
    sessionEnded: { ended: true },
    receiverRefused: "--name does not apply to revoke",
    untouched: true,
    receiverRevoked: { revoked: true, streams: 0 },
  };
  if (JSON.stringify(answers) !== JSON.stringify(expected))
    stats.unexpected.push(`ids beginning with "-": ${JSON.stringify(answers)}`);
  return { session: session.id, receiver: receiver.id, ...answers };
}

/**
 * `npm run demo -- --local-protocol https` (the certificate it makes) beside the sharded
 * `npm start`: the top-level environment's commands reach the demo's own database through its
 * gateway, trusting that certificate; a call without the demo's token is refused.
 */
async function demoOverHttps(): Promise<Record<string, unknown>> {
  const demoPort = await freePort();
  const args = ["run", "demo", "--", "--local-protocol", "https", "--ip", "127.0.0.1", "--port", String(demoPort)];
  const child = spawn("npm", args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let log = "";
  for (const stream of [child.stdout, child.stderr]) stream.on("data", (chunk) => (log += chunk));
  const closed = new Promise((resolve) => child.once("close", resolve));
  try {
    const deadline = Date.now() + 120_000;
    let server: DevServer | undefined;
    for (;;) {
      server = recordAt(demoPort);
      if (server && (await gatewayCall(server, "/__operator/vars").catch(() => null))?.status === 200) break;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`npm run demo did not come up:\n${log}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const topLevel = (script: string, more: string[]) =>
      run("npm", ["run", "--silent", script, "--", ...more], { cwd: ROOT }).then(({ stdout }) => JSON.parse(stdout));
    const user = `demo-check-${crypto.randomUUID()}`;
    const created = (await topLevel("session:create", ["--user", user])) as { id: string };
    const listed = ((await topLevel("session:list", ["--user", user])) as { sessions: { id: string }[] }).sessions;
    const ended = await topLevel("session:end", ["--user", user]);
    const answers = {
      listed: listed.map(({ id }) => id).join() === created.id,
      ended,
      withoutToken: (await gatewayCall(server, "/__operator/vars", undefined, null)).status,
      withToken: (await gatewayCall(server, "/__operator/vars")).status,
    };
    const expected = { listed: true, ended: { ended: 1 }, withoutToken: 401, withToken: 200 };
    if (JSON.stringify(answers) !== JSON.stringify(expected))
      stats.unexpected.push(`npm run demo over https: ${JSON.stringify(answers)}`);
    return answers;
  } finally {
    if (child.exitCode === null) process.kill(-(child.pid as number), "SIGTERM");
    await closed;
  }
}

/** The record of the server this checkout runs at `port`, if any. */
function recordAt(port: number): DevServer | undefined {
  return runningServers().find((server) => new URL(server.url).port === String(port));
}

/** An operator command as written (no `--env` added), whatever its exit code: the code, stdout and stderr. */
async function commandAsIs(script: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run("npm", ["run", "--silent", script, "--", ...args], { cwd: ROOT });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const { code, stdout, stderr } = error as { code?: number; stdout?: string; stderr?: string };
    return { code: code ?? -1, stdout: stdout ?? "", stderr: stderr ?? "" };
  }
}

/** The line a command names its server with. */
const serverLine = (stderr: string) => stderr.split("\n").find((line) => line.startsWith("server: ")) ?? null;

/** Every file under the checkout's own local state (.wrangler/state), with its size and time: what the commands would write on their own. */
function localFiles(dir = path.join(ROOT, ".wrangler", "state")): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return localFiles(file);
    const { size, mtimeMs } = statSync(file);
    return [`${file} ${size} ${mtimeMs}`];
  });
}

/**
 * Which server a command talks to (docs/operator-commands.md#which-server-a-command-works-through): it names the one it
 * uses on stderr; `--server` at a port where nothing listens, or where something that is no
 * server of this checkout answers, is refused (exit 1) with nothing written on the server or
 * in the local files; and with a second `npm start -- --env sharded` beside the first, a
 * command of that environment naming neither is refused, and `--server` reaches each, by port
 * (its environment taken) or by URL.
 */
async function serverChoice(): Promise<Record<string, unknown>> {
  const first = recordAt(port);
  if (!first) throw new Error(`no record of the npm start at ${base}`);
  const [named, refused, ambiguous, onSecond, onFirst] = await usersWhere(5, () => true);
  const listed = async (where: number, user: string | undefined) =>
    (
      JSON.parse((await commandAsIs("session:list", ["--user", user as string, "--server", String(where)])).stdout) as {
        sessions: unknown[];
      }
    ).sessions.length;
  const status = async (at: string, token: string) =>
    (
      await fetch(`${at}/auth/sessions`, {
        headers: { Authorization: `Bearer ${token}`, "CF-Connecting-IP": randomIp() },
      })
    ).status;

  const one = await commandAsIs("session:create", ["--user", named as string, ...ENV]);
  const filesBefore = localFiles();
  const nowhere = await freePort();
  const nothing = await commandAsIs("session:create", [
    "--user",
    refused as string,
    "--server",
    String(nowhere),
    ...ENV,
  ]);
  const stranger = createServer((_request, response) => response.end("not a session service"));
  const strangerPort = await freePort();
  await new Promise<void>((resolve) => stranger.listen(strangerPort, "127.0.0.1", resolve));
  const notOurs = await commandAsIs("session:create", [
    ...["--user", refused as string, "--server", `http://127.0.0.1:${strangerPort}`],
    ...ENV,
  ]).finally(() => stranger.close());
  const answers: Record<string, unknown> = {
    named: { code: one.code, line: serverLine(one.stderr) === `server: ${describeServer(first)}` },
    nothingListens: {
      code: nothing.code,
      stdout: nothing.stdout,
      said: nothing.stderr.includes(`nothing listens at port ${nowhere}; nothing was done`),
    },
    notOurs: {
      code: notOurs.code,
      stdout: notOurs.stdout,
      said: notOurs.stderr.includes("is no npm start or npm run demo of this checkout; nothing was done"),
    },
    nothingWritten: (await listed(port, refused)) === 0 && JSON.stringify(localFiles()) === JSON.stringify(filesBefore),
  };

  const secondPort = await freePort();
  const secondState = mkdtempSync(path.join(tmpdir(), "operator-check-second-"));
  const second = await startServer(secondPort, secondState);
  const secondBase = `http://127.0.0.1:${secondPort}`;
  try {
    const secondRecord = recordAt(secondPort);
    if (!secondRecord) throw new Error(`no record of the second npm start at ${secondBase}`);
    const neither = await commandAsIs("session:create", ["--user", ambiguous as string, ...ENV]);
    // By port alone, its environment taken from the server; by URL, with --env as usual.
    const viaPort = await commandAsIs("session:create", ["--user", onSecond as string, "--server", String(secondPort)]);
    const viaUrl = await commandAsIs("session:create", ["--user", onFirst as string, "--server", base, ...ENV]);
    const tokenOf = (output: string) => (JSON.parse(output) as { token: string }).token;
    answers.twoServers = {
      neither: {
        code: neither.code,
        stdout: neither.stdout,
        said: neither.stderr.includes("Name one with --server <port>"),
        written: (await listed(port, ambiguous)) + (await listed(secondPort, ambiguous)),
      },
      second: {
        line: serverLine(viaPort.stderr) === `server: ${describeServer(secondRecord)}`,
        // The session is on the second server's databases, not the first's.
        statuses: [await status(secondBase, tokenOf(viaPort.stdout)), await status(base, tokenOf(viaPort.stdout))],
      },
      first: {
        line: serverLine(viaUrl.stderr) === `server: ${describeServer(first)}`,
        statuses: [await status(base, tokenOf(viaUrl.stdout)), await status(secondBase, tokenOf(viaUrl.stdout))],
      },
    };
  } finally {
    await second.stop();
    rmSync(secondState, { recursive: true, force: true });
  }
  const expected = {
    named: { code: 0, line: true },
    nothingListens: { code: 1, stdout: "", said: true },
    notOurs: { code: 1, stdout: "", said: true },
    nothingWritten: true,
    twoServers: {
      neither: { code: 1, stdout: "", said: true, written: 0 },
      second: { line: true, statuses: [200, 401] },
      first: { line: true, statuses: [200, 401] },
    },
  };
  if (JSON.stringify(answers) !== JSON.stringify(expected))
    stats.unexpected.push(`which server a command talks to: ${JSON.stringify(answers)}`);
  return answers;
}

/** The pace `shards:move` reports: "… in 12.3 s (10.4 buckets/s) …". */
function bucketsPerSecond(output: string): number {
  const pace = / \(([\d.]+) buckets\/s\)/.exec(output)?.[1];
  if (pace === undefined) throw new Error(`shards:move printed no pace:\n${output}`);
  return Number(pace);
}

async function usersWhere(count: number, wanted: (bucket: number) => boolean): Promise<string[]> {
  const users: string[] = [];
  while (users.length < count) {
    const user = `check-${crypto.randomUUID()}`;
    if (wanted(await bucketOf(user))) users.push(user);
  }
  return users;
}

/** A newcomer's first admin key, before any `npm start`: the key file's directory is made, and the key listed. */
async function firstAdminKey(): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(path.join(tmpdir(), "operator-check-keys-"));
  const file = path.join(dir, "not-yet", "admin-keys.json");
  const keys = async (args: string[]) =>
    JSON.parse(
      (
        await run("npm", ["run", "--silent", "admin:keys", "--", ...args], {
          cwd: ROOT,
          env: { ...process.env, ADMIN_KEYS_FILE: file },
        })
      ).stdout,
    );
  try {
    const created = await keys(["create", "--name", "first", "--scope", "sessions:read"]);
    const { keys: listed } = await keys(["list"]);
    if (listed.length !== 1 || listed[0].id !== created.id)
      throw new Error(`admin:keys list gave ${JSON.stringify(listed)}, not the key just created`);
    return { created: created.id, listed: listed.length };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `--remote` (the deployed databases) with `org`: `sync-policies` alone takes it, never with
 * `--server` (a server's databases are the local ones); each refused before any database is
 * opened, so the checkout's local files are untouched and nothing reaches Cloudflare.
 */
async function orgRemoteRefused(): Promise<Record<string, unknown>> {
  const filesBefore = JSON.stringify(localFiles());
  const answers = {
    withServer: await refusedCommand("org", ["sync-policies", "--remote", "--server", "8787"]),
    create: await refusedCommand("org", ["create", "--name", "Initech", "--remote"]),
    nothingWritten: JSON.stringify(localFiles()) === filesBefore,
  };
  const expected = {
    withServer: "--server goes with local databases served by npm start, not with --remote",
    create: "--remote does not apply to create",
    nothingWritten: true,
  };
  if (JSON.stringify(answers) !== JSON.stringify(expected))
    stats.unexpected.push(`org --remote refused: ${JSON.stringify(answers)}`);
  return answers;
}

const firstKey = await firstAdminKey();
progress(`admin:keys before any npm start: ${JSON.stringify(firstKey)}`);
const orgRemote = await orgRemoteRefused();
progress(`org --remote refused: ${JSON.stringify(orgRemote)}`);

const state = mkdtempSync(path.join(tmpdir(), "operator-check-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
let dev = await startServer(port, state);
progress(`npm start serves on ${base}`);
const report: Record<string, unknown> = { firstAdminKey: firstKey, orgRemoteRefused: orgRemote };
/** The logs of servers already stopped. */
const logs: string[] = [];
try {
  const inRange = (bucket: number) => bucket >= MOVED.first && bucket <= MOVED.last;
  const moved = await usersWhere(USERS_MOVED, inRange);
  const staying = await usersWhere(USERS_STAYING, (bucket) => !inRange(bucket));
  const driven = [...moved, ...staying];
  const operated = [...(await usersWhere(2, inRange)), ...(await usersWhere(2, (bucket) => !inRange(bucket)))];

  const started = Date.now();
  const requestsBefore = stats.requests;
  const moveOutput = await underLoad(base, driven, async () => {
    const [move, commands] = await Promise.all([
      command("shards:move", ["--buckets", `${MOVED.first}-${MOVED.last}`, "--to", "DB_2"]),
      (async () => {
        const count = await sessionCommands(operated);
        await command("db:status", []);
        await command("db:migrate:local", []);
        return count + 2;
      })(),
    ]);
    report.commandsDuringMove = commands;
    return move;
  });
  report.moveSeconds = Math.round((Date.now() - started) / 1000);
  report.requestsPerSecondWhileMoving = Math.round(((stats.requests - requestsBefore) * 1000) / (Date.now() - started));
  const shards = /SHARDS = '(.+)'/.exec(moveOutput)?.[1];
  if (!shards) throw new Error(`shards:move printed no SHARDS:\n${moveOutput}`);
  progress(
    `moved in ${report.moveSeconds} s; so far ${stats.requests} requests, ${stats.fiveXx} 5xx, ${stats.moving} 503 moving`,
  );
  const checks = [await verify(base, "after the move")];

  // The local deploy: the same databases, served with the SHARDS the move printed.
  await dev.stop();
  logs.push(dev.log());
  dev = await startServer(port, state, shards);
  opened = null;
  checks.push(await verify(base, "after deploying the printed SHARDS"));
  progress("restarted with the printed SHARDS");
  const finish = await underLoad(base, driven, async () => {
    const [output] = await Promise.all([command("shards:move", ["--finish"]), sessionCommands(operated)]);
    return output.trim();
  });
  progress(`finished: ${finish}`);
  checks.push(await verify(base, "after --finish"));

  report.dashIds = await dashIds();
  progress(`ids beginning with "-": ${JSON.stringify(report.dashIds)}`);

  report.serverChoice = await serverChoice();
  progress(`which server a command talks to: ${JSON.stringify(report.serverChoice)}`);

  report.demoOverHttps = await demoOverHttps();
  progress(`npm run demo over https: ${JSON.stringify(report.demoOverHttps)}`);

  // The same move with no client running: its users are signed in first, and must be intact after.
  for (const user of await usersWhere(USERS_MOVED, (bucket) => bucket >= MOVED_IDLE.first && bucket <= MOVED_IDLE.last))
    for (let i = 0; i < SESSIONS_PER_USER; i++) await signIn(user);
  const idle = await command("shards:move", ["--buckets", `${MOVED_IDLE.first}-${MOVED_IDLE.last}`, "--to", "DB_2"]);
  checks.push(await verify(base, "after a move with no load"));

  const serverErrors = [...logs, dev.log()]
    .join("\n")
    .split("\n")
    // The expected 503 `moving` is a warning (`bucket_moving`); an error line is a failure.
    .filter((line) => line.includes('"level":"error"'));
  Object.assign(report, {
    users: USERS,
    bucketsMoved: buckets,
    requests: stats.requests,
    commandsRetriedWhileMoving: commandsRetried,
    fiveXx: stats.fiveXx,
    moving503: stats.moving,
    movingWindows: movingWindows.length,
    longestMovingWindowMs: longestMovingMs,
    bucketsPerSecondUnderLoad: bucketsPerSecond(moveOutput),
    bucketsPerSecondIdle: bucketsPerSecond(idle),
    unexpected: stats.unexpected,
    finish,
    checks,
    serverErrorLines: serverErrors.length,
  });
  console.log(JSON.stringify(report, null, 2));
  // Figures, not bounds: a loaded machine stretches both.
  console.log(
    `operator check: longest 503 window: ${longestMovingMs} ms (${movingWindows.length} windows); buckets moved per second: ${report.bucketsPerSecondIdle} idle, ${report.bucketsPerSecondUnderLoad} under load`,
  );
  const failed =
    stats.fiveXx > 0 ||
    stats.unexpected.length > 0 ||
    serverErrors.length > 0 ||
    checks.some((check) => check.wrong.length > 0);
  if (failed) {
    console.error("operator check: FAILED");
    process.exitCode = 1;
  } else {
    console.log("operator check: 0 5xx, nothing lost or revived");
  }
} finally {
  await dev.stop();
  rmSync(state, { recursive: true, force: true });
}
