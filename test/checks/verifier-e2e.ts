// `npm run check:verifier`: revocation reaching the verifiers of access tokens, end to end, with
// the reference verifier a product copies (examples/token-verifier/). It starts the real
// `npm start` (its own port and state), issues a Shared Signals receiver credential with the
// operator's command, and starts three verifiers in this process: one polling its stream every
// 250 ms, one whose stream pushes to a node:http server here on loopback, and one that does not
// listen. Then, a few rounds: a session (`session:create`), an access token (POST /auth/token)
// that all three accept, the user's logout (POST /auth/logout), and the time from the logout's
// answer until each listening verifier refuses the same token, checked every 10 ms. Prints one
// JSON report with those lags; exits 1 if a listening verifier still accepts the token after
// 10 s or at its `exp`, if the token or a SET does not verify, or if the verifier that does not
// listen refuses the token before its `exp` (it must not: that is the point of the comparison).
// The pushes come from the logout's own request, after its answer: wrangler dev runs no cron,
// and the minute cron sends an event again only once it waited 60 s (src/services/resend.ts).
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { decodeJwt } from "jose";
import { freePort, startNpmStart } from "../../dev/npm-start.ts";
import { createVerifier, SESSION_REVOKED, TokenRefused } from "../../examples/token-verifier/verifier.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const AUDIENCE = "https://verifiers.example";
const PUSH_AUTHORIZATION = "Bearer e2e-verifier-push";
const POLL_INTERVAL_MS = 250;
const ROUNDS = 5;
const WAIT_MS = 10_000;
const run = promisify(execFile);

async function command(script: string, args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run("npm", ["run", "--silent", script, "--", ...args], { cwd: ROOT });
  return JSON.parse(stdout);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? null;

const state = mkdtempSync(path.join(tmpdir(), "verifier-e2e-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const server = await startNpmStart(port, state);
const problems: string[] = [];
const onError = (error: unknown) => problems.push(`verifier: ${error instanceof Error ? error.message : error}`);
const pushPort = await freePort();
/** When each pushed session-revoked reached the push endpoint, by session id. */
const pushed = new Map<string, number>();
const verifiers: { stop(): Promise<void> }[] = [];
const pushServer = createServer();

try {
  const configurationUrl = `${base}/.well-known/ssf-configuration`;
  const { credential } = (await command("ssf:receivers", ["issue", "--name", "verifiers", "--audience", AUDIENCE])) as {
    credential: string;
  };
  const tokens = { issuer: base, audience: base, onError };
  const ssf = { configurationUrl, credential, audience: AUDIENCE };
  const poll = createVerifier({
    ...tokens,
    ssf: { ...ssf, delivery: { method: "poll", intervalMs: POLL_INTERVAL_MS }, description: "e2e poll verifier" },
  });
  const push = createVerifier({
    ...tokens,
    ssf: {
      ...ssf,
      delivery: {
        method: "push",
        endpointUrl: `http://127.0.0.1:${pushPort}/ssf/events`,
        authorization: PUSH_AUTHORIZATION,
      },
      description: "e2e push verifier",
    },
  });
  const deaf = createVerifier(tokens);
  pushServer.on("request", (request, response) => {
    // Beside the verifier's own listener: when the SET arrived, and for which session.
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      const at = Date.now();
      try {
        const claims = decodeJwt(body);
        const sid = (claims.sub_id as { session?: { id?: string } }).session?.id;
        if (sid && (claims.events as Record<string, unknown>)[SESSION_REVOKED]) pushed.set(sid, at);
      } catch {}
    });
    push.pushListener(request, response);
  });
  await new Promise<void>((resolve) => pushServer.listen(pushPort, "127.0.0.1", resolve));
  for (const verifier of [poll, push, deaf]) {
    await verifier.start();
    verifiers.push(verifier);
  }

  const listening = { poll, push };
  const rounds: Record<string, number | null>[] = [];
  const stamp = Date.now();
  for (let round = 1; round <= ROUNDS; round++) {
    const user = `verifier-e2e-${stamp}-${round}`;
    const session = (await command("session:create", ["--user", user])) as { id: string; token: string };
    const bearer = { Authorization: `Bearer ${session.token}` };
    const minted = await fetch(`${base}/auth/token`, { method: "POST", headers: bearer });
    if (minted.status !== 200) throw new Error(`POST /auth/token answered ${minted.status}: ${await minted.text()}`);
    const { access_token: token } = (await minted.json()) as { access_token: string; expires_in: number };
    for (const [name, verifier] of Object.entries({ ...listening, deaf })) {
      const claims = await verifier.verify(token);
      if (claims.sid !== session.id || claims.sub !== user)
        problems.push(`${name}: the token says sid ${claims.sid}, sub ${claims.sub}`);
    }
    if (round === 1) {
      // A token whose signature is not the service's is refused as any bad token is.
      const [header, payload, signature] = token.split(".") as [string, string, string];
      const forged = `${header}.${payload}.${signature.startsWith("A") ? "B" : "A"}${signature.slice(1)}`;
      const answer = await poll.verify(forged).catch((error: unknown) => error);
      if (!(answer instanceof TokenRefused && answer.code === "invalid_token"))
        problems.push(`a forged token was not refused as invalid_token: ${String(answer)}`);
    }

    const logout = await fetch(`${base}/auth/logout`, { method: "POST", headers: bearer });
    const ended = Date.now();
    if (logout.status !== 200) throw new Error(`POST /auth/logout answered ${logout.status}`);
    const exp = decodeJwt(token).exp as number;
    const deadline = Math.min(ended + WAIT_MS, exp * 1000);
    const refused: Record<string, number> = {};
    while (Object.keys(refused).length < Object.keys(listening).length && Date.now() < deadline) {
      for (const [name, verifier] of Object.entries(listening)) {
        if (name in refused) continue;
        try {
          await verifier.verify(token);
        } catch (error) {
          if (error instanceof TokenRefused && error.code === "session_revoked") refused[name] = Date.now();
          else throw error;
        }
      }
      await sleep(10);
    }
    for (const name of Object.keys(listening))
      if (!(name in refused))
        problems.push(`round ${round}: ${name} still accepts the token ${WAIT_MS} ms after logout`);
    // The verifier that does not listen: still accepts it, as it will until exp.
    const deafClaims = await deaf.verify(token).catch((error: unknown) => error);
    if (deafClaims instanceof Error) problems.push(`round ${round}: the verifier that does not listen refused it`);
    const lag = (at: number | undefined) => (at === undefined ? null : Math.max(0, at - ended));
    rounds.push({
      round,
      pollRefusedMs: lag(refused.poll),
      pushRefusedMs: lag(refused.push),
      pushArrivedMs: lag(pushed.get(session.id)),
      secondsLeftBeforeExp: Math.round((exp * 1000 - Math.max(...Object.values(refused), ended)) / 1000),
    });
  }

  const lags = (key: string) => rounds.flatMap((row) => (typeof row[key] === "number" ? [row[key] as number] : []));
  console.log(
    JSON.stringify({
      pollIntervalMs: POLL_INTERVAL_MS,
      rounds,
      poll: { medianMs: median(lags("pollRefusedMs")), maxMs: Math.max(...lags("pollRefusedMs")) },
      push: { medianMs: median(lags("pushRefusedMs")), maxMs: Math.max(...lags("pushRefusedMs")) },
      notListening: "accepts the token until its exp (ACCESS_TOKEN_TTL_SECONDS after it was minted)",
      problems,
    }),
  );
} catch (error) {
  problems.push(error instanceof Error ? error.message : String(error));
  console.error(problems.join("\n"));
} finally {
  for (const verifier of verifiers) await verifier.stop();
  pushServer.close();
  await server.stop();
  rmSync(state, { recursive: true, force: true });
}
if (problems.length > 0) process.exitCode = 1;
