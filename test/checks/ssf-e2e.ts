// `npm run check:ssf`: Shared Signals end to end, as a receiver sees them. It starts the real
// `npm start` (its own port and state), and in this process a small receiver (node:http) that
// verifies every pushed SET with `jose`, in another runtime than the worker's, against the key set
// the transmitter publishes, its issuer as discovered, and its audience. It issues a receiver
// credential and creates a push stream with the operator's and receiver's own calls, then ends
// sessions every way an HTTP request can and waits for each one's `session-revoked`. (The
// operator's commands leave their events to the worker's minute cron, which wrangler dev does
// not run, and the RPC and the cap need a service binding: test/ssf-delivery.test.ts covers them.)
// It is an upstream too: a stand-in identity provider, configured in SSF_UPSTREAMS with a key
// made here, pushes RISC account-disabled for a user to POST /ssf/inbound, signed with `jose`,
// and that user's sessions here end and go out as session-revoked by the system. Prints one JSON
// report with the push latency from each ending's answer to the SET's arrival; exits 1 if a SET
// is missing, late (10 s) or does not verify, or a session the upstream ended still works.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { createRemoteJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT } from "jose";
import { freePort, startNpmStart } from "../../dev/npm-start.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const REVOKED = "https://schemas.openid.net/secevent/caep/event-type/session-revoked";
const ACCOUNT_DISABLED = "https://schemas.openid.net/secevent/risc/event-type/account-disabled";
const UPSTREAM = { issuer: "https://idp.e2e.example", name: "e2e-idp" };
const AUDIENCE = "https://receiver.example";
const WAIT_MS = 10_000;
const run = promisify(execFile);

async function command(script: string, args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run("npm", ["run", "--silent", script, "--", ...args], { cwd: ROOT });
  return JSON.parse(stdout);
}

const state = mkdtempSync(path.join(tmpdir(), "ssf-e2e-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const upstreamKey = await generateKeyPair("ES256", { extractable: true });
const upstreamJwk = { ...(await exportJWK(upstreamKey.publicKey)), kid: "e2e-idp-1", alg: "ES256" };
// Its SET names the user by this service's id: the user never signed in through it.
const upstreams = [
  { ...UPSTREAM, audience: base, subject: "iss_sub", subjects_are_user_ids: true, jwks: { keys: [upstreamJwk] } },
];
const server = await startNpmStart(port, state, ["--var", `SSF_UPSTREAMS:${JSON.stringify(upstreams)}`]);
const problems: string[] = [];
const receiverPort = await freePort();
const arrived = new Map<string, { at: number; reason: unknown; by: unknown }>();
const receiver = createServer();

try {
  const metadata = (await (await fetch(`${base}/.well-known/ssf-configuration`)).json()) as Record<string, string>;
  const keys = createRemoteJWKSet(new URL(metadata.jwks_uri as string));
  receiver.on("request", (request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", async () => {
      const at = Date.now();
      try {
        if (request.headers["content-type"] !== "application/secevent+jwt") throw new Error("content type");
        if (request.headers.authorization !== "Bearer e2e-push-secret") throw new Error("authorization");
        const { payload, protectedHeader } = await jwtVerify(body, keys, {
          issuer: metadata.issuer,
          audience: AUDIENCE,
          typ: "secevent+jwt",
        });
        if (protectedHeader.typ !== "secevent+jwt" || "sub" in payload || "exp" in payload) throw new Error("claims");
        const event = (payload.events as Record<string, Record<string, unknown>>)[REVOKED];
        const session = (payload.sub_id as { session?: { id: string } }).session?.id;
        if (event && session) arrived.set(session, { at, reason: event.reason_admin, by: event.initiating_entity });
        response.writeHead(202).end();
      } catch (error) {
        problems.push(`a SET did not verify: ${error instanceof Error ? error.message : error}`);
        response.writeHead(400, { "Content-Type": "application/json", "Content-Language": "en" });
        response.end(JSON.stringify({ err: "invalid_request", description: "did not verify" }));
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(receiverPort, "127.0.0.1", resolve));

  const { credential } = await command("ssf:receivers", ["issue", "--name", "e2e", "--audience", AUDIENCE]);
  const created = await fetch(metadata.configuration_endpoint as string, {
    method: "POST",
    headers: { Authorization: `Bearer ${credential}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      events_requested: [REVOKED],
      delivery: {
        method: "urn:ietf:rfc:8935",
        endpoint_url: `http://127.0.0.1:${receiverPort}/events`,
        authorization_header: "Bearer e2e-push-secret",
      },
    }),
  });
  if (created.status !== 201) throw new Error(`creating the stream answered ${created.status}`);

  const login = async (user: string) =>
    (await command("session:create", ["--user", user])) as { id: string; token: string };
  const http = (method: string, url: string, token: string) =>
    fetch(`${base}${url}`, { method, headers: { Authorization: `Bearer ${token}` } });
  const user = `e2e-${Date.now()}`;
  /** Each way sessions end, and what their session-revoked must say: who, and why (reason_admin.en). */
  const ways: { way: string; sessions: string[]; by: string; reason: string; ended: number }[] = [];
  const ending = async (
    way: string,
    sessions: string[],
    said: { by: string; reason: string },
    act: () => Promise<unknown>,
  ) => {
    await act();
    ways.push({ way, sessions, ...said, ended: Date.now() });
  };

  const [a, b] = [await login(user), await login(user)];
  await ending("POST /auth/logout", [a.id], { by: "user", reason: "The user signed out" }, () =>
    http("POST", "/auth/logout", a.token),
  );
  const c = await login(user);
  await ending(
    "DELETE /auth/sessions/:id",
    [b.id],
    { by: "user", reason: "The user signed this session out from another" },
    () => http("DELETE", `/auth/sessions/${b.id}`, c.token),
  );
  const d = await login(user);
  await ending(
    "DELETE /auth/logout?scope=others",
    [c.id],
    { by: "user", reason: "The user signed out everywhere else" },
    () => http("DELETE", "/auth/logout?scope=others", d.token),
  );
  const e = await login(user);
  await ending(
    "DELETE /auth/logout (everywhere)",
    [d.id, e.id],
    { by: "user", reason: "The user signed out everywhere" },
    () => http("DELETE", "/auth/logout", e.token),
  );

  // The stand-in identity provider disables another user's account: every session of theirs ends.
  const disabled = `e2e-disabled-${Date.now()}`;
  const [f, g] = [await login(disabled), await login(disabled)];
  const set = await new SignJWT({
    jti: crypto.randomUUID(),
    sub_id: { format: "iss_sub", iss: UPSTREAM.issuer, sub: disabled },
    events: { [ACCOUNT_DISABLED]: { reason: "hijacking" } },
  })
    .setProtectedHeader({ alg: "ES256", kid: upstreamJwk.kid, typ: "secevent+jwt" })
    .setIssuer(UPSTREAM.issuer)
    .setAudience(base)
    .setIssuedAt()
    .sign(upstreamKey.privateKey);
  const pushSet = () =>
    fetch(`${base}/ssf/inbound`, {
      method: "POST",
      headers: { "Content-Type": "application/secevent+jwt", Accept: "application/json" },
      body: set,
    });
  const bySystem = { by: "system", reason: `${UPSTREAM.name}:account-disabled` };
  await ending("upstream RISC account-disabled", [f.id, g.id], bySystem, async () => {
    const pushed = await pushSet();
    if (pushed.status !== 202) problems.push(`the upstream's SET answered ${pushed.status}: ${await pushed.text()}`);
  });
  for (const session of [f, g]) {
    const status = (await http("GET", "/auth/sessions", session.token)).status;
    if (status !== 401) problems.push(`a session the upstream ended still answers ${status}`);
  }
  // Pushed again (a retry whose answer was lost): accepted as the first time, acted on once.
  const again = await pushSet();
  if (again.status !== 202) problems.push(`the same SET again answered ${again.status}`);

  const deadline = Date.now() + WAIT_MS;
  const missing = () => ways.flatMap(({ sessions }) => sessions.filter((id) => !arrived.has(id)));
  while (missing().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  for (const id of missing()) problems.push(`no session-revoked for ${id} within ${WAIT_MS} ms`);
  for (const { way, sessions, by, reason } of ways) {
    for (const got of sessions.flatMap((id) => arrived.get(id) ?? [])) {
      if (got.by !== by || (got.reason as { en?: unknown } | undefined)?.en !== reason)
        problems.push(`${way}: session-revoked said ${JSON.stringify(got)}, not ${by} and "${reason}"`);
    }
  }
  const report = ways.map(({ way, sessions, ended }) => ({
    way,
    latencyMs: sessions.map((id) => (arrived.has(id) ? Math.max(0, (arrived.get(id)?.at as number) - ended) : null)),
    initiatingEntity: arrived.get(sessions[0] as string)?.by ?? null,
  }));
  const latencies = report
    .flatMap((row) => row.latencyMs.filter((ms): ms is number => ms !== null))
    .sort((x, y) => x - y);
  console.log(
    JSON.stringify({
      ways: report,
      medianLatencyMs: latencies[Math.floor(latencies.length / 2)] ?? null,
      maxLatencyMs: latencies.at(-1) ?? null,
      problems,
    }),
  );
} catch (error) {
  problems.push(error instanceof Error ? error.message : String(error));
  console.error(problems.join("\n"));
} finally {
  receiver.close();
  await server.stop();
  rmSync(state, { recursive: true, force: true });
}
if (problems.length > 0) process.exitCode = 1;
