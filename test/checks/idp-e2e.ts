// `npm run check:idp`: an identity provider ends sessions here, end to end, in the words
// Keycloak, Auth0 and Okta speak. It starts a stand-in provider in a process of its own
// (test/checks/idp-stand-in.ts: `jose`, its own keys and JWK Set), lists it as an upstream of
// the real `npm start` (SSF_UPSTREAMS, its jwks_uri plain http on loopback, as a provider run
// locally serves it), makes an admin key, and starts the reference verifier
// of access tokens (examples/token-verifier/) with a pushed Shared Signals stream. Then, as a
// login flow does after the provider's OIDC callback, it signs a user in three times over the
// admin API: twice with the provider's `sub` and a `sid` each, once without. The provider sends
// a back-channel logout for the first `sid`: that session is refused at once by whoami and,
// within WAIT_MS, by the verifier; the others stay. Sent again after the user signed in anew with
// that sid, and forged with a stranger's key: nothing more ends. Then a global token revocation of the subject ends the
// user's other two sessions, seen by whoami and the verifier. Then the provider pushes a CAEP
// `credential-change` naming its own subject (a Shared Signals SET to POST /ssf/inbound): the next
// whoami of a session signed in through it is held with the RFC 9470 challenge; a local
// re-authentication over the admin API is refused, and one with the provider's fresh sign-in (its
// `auth_time` after the event), as the login flow sends it, lifts the hold. Prints one JSON report with the
// lags; exits 1 on any answer other than the one expected. The server places every request in
// Paris (DEV_PLACE): a session:create placed there is not held at its first cookie use, one
// placed in Sydney is, as travel (the default hold). Then sign-outs sent back: the
// stand-in, a Shared Signals receiver too (`push` in its entry, the Authorization in the secret
// SSF_UPSTREAM_AUTHORIZATIONS), gets CAEP session-established at a sign-in and session-revoked
// naming its own sub and sid when the user signs out here, both verified with the service's JWK
// Set; and never a session-revoked for the endings it asked for itself. Last, a sign-in whose provider's `session_expiry` is two minutes away is
// refused after it by whoami and the verifier (IPSIE SL1).
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { freePort, startNpmStart } from "../../dev/npm-start.ts";
import { createVerifier, TokenRefused } from "../../examples/token-verifier/verifier.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const AUDIENCE = "https://verifiers.example";
const PUSH_AUTHORIZATION = "Bearer e2e-idp-push";
const WAIT_MS = 10_000;
const UPSTREAM = "stand-in";
const SIGNALS_AUTHORIZATION = "Bearer e2e-idp-signals";
const PARIS = ["48.8566", "2.3522"];
const SYDNEY = ["-33.8688", "151.2093"];
const CHROME =
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const CLIENT_ID = "session-service";
/** The `aud` of the stand-in's SETs: what this service is known by to it. */
const SET_AUDIENCE = "https://sessions.e2e.example";
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const state = mkdtempSync(path.join(tmpdir(), "idp-e2e-"));
const problems: string[] = [];
const expect = (what: string, ok: boolean, seen: unknown = "") => {
  if (!ok) problems.push(`${what}: ${typeof seen === "string" ? seen : JSON.stringify(seen)}`);
};

// The stand-in provider: a process of its own, which prints where it listens and its keys.
const provider = spawn(
  process.execPath,
  ["--disable-warning=ExperimentalWarning", path.join(import.meta.dirname, "idp-stand-in.ts"), CLIENT_ID],
  {
    stdio: ["ignore", "pipe", "inherit"],
  },
);
const { port: providerPort, issuer } = JSON.parse(
  await new Promise<string>((resolve) => createInterface({ input: provider.stdout }).once("line", resolve)),
) as { port: number; issuer: string };
const toProvider = async (what: "logout" | "revoke" | "set", body: Record<string, unknown>) => {
  const response = await fetch(`http://127.0.0.1:${providerPort}/${what}`, {
    method: "POST",
    body: JSON.stringify(body),
  });
  return (await response.json()) as { status: number; body: string; jti?: string };
};

const varsFile = path.join(state, "upstreams.env");
const upstreams = [
  {
    issuer,
    name: UPSTREAM,
    client_id: CLIENT_ID,
    audience: SET_AUDIENCE,
    subject: "iss_sub",
    jwks_uri: `http://127.0.0.1:${providerPort}/jwks`,
    push: { endpoint_url: `http://127.0.0.1:${providerPort}/ssf/push` },
  },
];
const authorizations = JSON.stringify({ [UPSTREAM]: SIGNALS_AUTHORIZATION });
writeFileSync(
  varsFile,
  `SSF_UPSTREAMS='${JSON.stringify(upstreams)}'\nSSF_UPSTREAM_AUTHORIZATIONS='${authorizations}'\nDEV_PLACE=${PARIS.join(",")},FR\n`,
  { mode: 0o600 },
);
const env = { ADMIN_KEYS_FILE: path.join(state, "admin-keys.json") };
async function command(script: string, args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run("npm", ["run", "--silent", script, "--", ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  return JSON.parse(stdout);
}
const { key: adminKey } = (await command("admin:keys", [
  ...["create", "--name", "login flow", "--scope", "sessions:create"],
])) as { key: string };

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const server = await startNpmStart(port, path.join(state, "npm-start"), ["--env-file", varsFile], env);
const pushPort = await freePort();
const pushServer = createServer();
const verifiers: { stop(): Promise<void> }[] = [];

try {
  const { credential } = (await command("ssf:receivers", ["issue", "--name", "verifiers", "--audience", AUDIENCE])) as {
    credential: string;
  };
  const verifier = createVerifier({
    issuer: base,
    audience: base,
    onError: (error: unknown) => problems.push(`verifier: ${error instanceof Error ? error.message : error}`),
    ssf: {
      configurationUrl: `${base}/.well-known/ssf-configuration`,
      credential,
      audience: AUDIENCE,
      delivery: {
        method: "push",
        endpointUrl: `http://127.0.0.1:${pushPort}/ssf/events`,
        authorization: PUSH_AUTHORIZATION,
      },
      description: "e2e identity provider verifier",
    },
  });
  pushServer.on("request", (request, response) => verifier.pushListener(request, response));
  await new Promise<void>((resolve) => pushServer.listen(pushPort, "127.0.0.1", resolve));
  await verifier.start();
  verifiers.push(verifier);

  const user = `idp-e2e-${Date.now()}`;
  const subject = `stand-in-subject-${crypto.randomUUID()}`;
  const signIn = async (upstream: Record<string, unknown> | undefined) => {
    const response = await fetch(`${base}/admin/sessions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${adminKey}`, "Content-Type": "application/json" },
      body: JSON.stringify({ userId: user, ...(upstream ? { upstream } : {}) }),
    });
    if (response.status !== 201)
      throw new Error(`POST /admin/sessions answered ${response.status}: ${await response.text()}`);
    const { id, token } = (await response.json()) as { id: string; token: string };
    const minted = await fetch(`${base}/auth/token`, { method: "POST", headers: { Authorization: `Bearer ${token}` } });
    if (minted.status !== 200) throw new Error(`POST /auth/token answered ${minted.status}`);
    return { id, token, accessToken: ((await minted.json()) as { access_token: string }).access_token };
  };
  const whoami = async (token: string) =>
    (await fetch(`${base}/auth/whoami`, { headers: { Authorization: `Bearer ${token}` } })).status;
  /** When the verifier first refuses `accessToken` as revoked, within WAIT_MS of `since`; null if it never does. */
  const refusedAfter = async (accessToken: string, since: number): Promise<number | null> => {
    while (Date.now() < since + WAIT_MS) {
      try {
        await verifier.verify(accessToken);
      } catch (error) {
        if (error instanceof TokenRefused && error.code === "session_revoked") return Date.now() - since;
        throw error;
      }
      await sleep(10);
    }
    return null;
  };

  // A sign-in placed by session:create, then its first cookie use placed by DEV_PLACE (Paris).
  const placedSignIn = async ([latitude, longitude]: string[]) => {
    const { token } = (await command("session:create", [
      ...["--user", `${user}-placed`, "--carrier", "cookie", "--user-agent", CHROME],
      ...["--latitude", String(latitude), "--longitude", String(longitude)],
    ])) as { token: string };
    const used = await fetch(`${base}/auth/sessions`, {
      headers: { Cookie: `__Host-session=${token}`, "User-Agent": CHROME },
    });
    return {
      status: used.status,
      code: used.status === 200 ? null : ((await used.json()) as { code: string }).code,
    };
  };
  const here = await placedSignIn(PARIS);
  expect("a sign-in placed in Paris is not held at its first cookie use from Paris", here.status === 200, here);
  const far = await placedSignIn(SYDNEY);
  expect(
    "a sign-in placed in Sydney is held at its first cookie use from Paris (travel, hold)",
    far.status === 401 && far.code === "reauthentication_required",
    far,
  );

  const first = await signIn({ provider: UPSTREAM, subject, sid: "sid-first" });
  const second = await signIn({ provider: UPSTREAM, subject, sid: "sid-second" });
  const password = await signIn(undefined);
  for (const session of [first, second, password]) {
    const claims = await verifier.verify(session.accessToken);
    expect("the verifier accepts a live session's token", claims.sid === session.id, claims);
  }
  const whoamiShows = await fetch(`${base}/auth/whoami`, { headers: { Authorization: `Bearer ${first.token}` } });
  expect(
    "whoami shows the upstream sign-in",
    JSON.stringify(((await whoamiShows.json()) as { upstream?: unknown }).upstream) ===
      JSON.stringify({ provider: UPSTREAM, subject, sid: "sid-first" }),
  );

  const logoutUrl = `${base}/upstreams/${UPSTREAM}/backchannel-logout`;
  const logout = await toProvider("logout", { target: logoutUrl, sub: subject, sid: "sid-first" });
  const loggedOutAt = Date.now();
  expect("the back-channel logout is answered 200", logout.status === 200, logout);
  const whoamiAfterLogout = await whoami(first.token);
  expect("whoami refuses the logged-out session at once", whoamiAfterLogout === 401, whoamiAfterLogout);
  const logoutLag = await refusedAfter(first.accessToken, loggedOutAt);
  expect(`the verifier refuses its access token within ${WAIT_MS} ms`, logoutLag !== null);
  expect(
    "the other sid and the password session stay",
    (await whoami(second.token)) === 200 && (await whoami(password.token)) === 200,
  );

  // Signed in again with that sid: a resent token must not end it (acted on once per jti).
  const again = await signIn({ provider: UPSTREAM, subject, sid: "sid-first" });
  const replay = await toProvider("logout", { target: logoutUrl, sub: subject, jti: logout.jti });
  expect("a resent logout token is answered 200", replay.status === 200, replay);
  expect("a resent logout token ends no session signed in since", (await whoami(again.token)) === 200);
  const forged = await toProvider("logout", { target: logoutUrl, sub: subject, forged: true });
  expect("a logout token signed by a stranger's key is refused 400", forged.status === 400, forged);
  expect("nothing more ended", (await whoami(second.token)) === 200 && (await whoami(password.token)) === 200);

  const revocationUrl = `${base}/upstreams/${UPSTREAM}/global-token-revocation`;
  const unknown = await toProvider("revoke", { target: revocationUrl, sub: "nobody-signed-in" });
  expect("a revocation of a subject never signed in is 404", unknown.status === 404, unknown);
  const revoked = await toProvider("revoke", { target: revocationUrl, sub: subject });
  const revokedAt = Date.now();
  expect("the global token revocation is answered 204", revoked.status === 204, revoked);
  const whoamiAfterRevocation = [await whoami(second.token), await whoami(password.token)];
  expect(
    "whoami refuses every other session of the user at once",
    whoamiAfterRevocation.every((status) => status === 401),
    whoamiAfterRevocation,
  );
  const revocationLags = [
    await refusedAfter(second.accessToken, revokedAt),
    await refusedAfter(password.accessToken, revokedAt),
  ];
  expect(
    `the verifier refuses their access tokens within ${WAIT_MS} ms`,
    revocationLags.every((lag) => lag !== null),
  );

  // The provider's credential change: re-established, not ended (IPSIE SL2).
  const credentialChangeHolds = async () => {
    const held = await signIn({ provider: UPSTREAM, subject, sid: "sid-held" });
    expect("a session signed in through the provider is live", (await whoami(held.token)) === 200);
    const pushed = await toProvider("set", {
      target: `${base}/ssf/inbound`,
      audience: SET_AUDIENCE,
      event: "credential-change",
      sub: subject,
      claims: { credential_type: "password", change_type: "update" },
    });
    expect("the credential-change SET is answered 202", pushed.status === 202, pushed);
    const refused = await fetch(`${base}/auth/whoami`, { headers: { Authorization: `Bearer ${held.token}` } });
    const challenge = refused.headers.get("WWW-Authenticate") ?? "";
    const { code } = (await refused.json()) as { code?: string };
    expect(
      "the next whoami is held: 401 reauthentication_required with the RFC 9470 challenge",
      refused.status === 401 &&
        code === "reauthentication_required" &&
        challenge.includes('error="insufficient_user_authentication"'),
      { status: refused.status, code, challenge },
    );
    const reauthenticate = (body: Record<string, unknown>) =>
      fetch(`${base}/admin/sessions/reauthenticate`, {
        method: "POST",
        headers: { Authorization: `Bearer ${adminKey}`, "Content-Type": "application/json" },
        body: JSON.stringify({ token: held.token, ...body }),
      });
    const local = await reauthenticate({ factors: ["pwd", "otp"] });
    const { code: localCode } = (await local.json()) as { code?: string };
    expect(
      "a local re-authentication does not lift the provider's hold: 400 invalid_input",
      local.status === 400 && localCode === "invalid_input",
      { status: local.status, code: localCode },
    );
    expect("the session is still held", (await whoami(held.token)) === 401);
    // The provider's fresh sign-in, a second after its event (auth_time is in whole seconds).
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const signedIn = { provider: UPSTREAM, subject, sid: "sid-held", auth_time: Math.floor(Date.now() / 1000) };
    const reauthenticated = await reauthenticate({ upstream: signedIn });
    expect(
      "the re-authentication with the provider's sign-in is answered 200",
      reauthenticated.status === 200,
      reauthenticated.status,
    );
    const { token } = (await reauthenticated.json()) as { token: string };
    expect("the re-authenticated session is live again", (await whoami(token)) === 200);
  };
  await credentialChangeHolds();

  // Sign-outs sent back: the stand-in's receiver, told the transmitter only now, so the
  // sign-ins above were answered 503 (retried later); what it verifies from here on is checked.
  const signOutsSentBack = await (async () => {
    type Received = { at: number; verified: boolean; claims: Record<string, unknown> | null; error?: string };
    const receivedSets = async () =>
      (await (await fetch(`http://127.0.0.1:${providerPort}/ssf/received`)).json()) as Received[];
    const ofSid = (set: Received, type: string, sid: string) => {
      const named = set.claims?.sub_id as { user?: { iss?: string; sub?: string }; session?: { id?: string } };
      return (
        set.claims?.events !== undefined &&
        Object.keys(set.claims.events as object).includes(
          `https://schemas.openid.net/secevent/caep/event-type/${type}`,
        ) &&
        named?.user?.iss === issuer &&
        named.user.sub === subject &&
        named.session?.id === sid
      );
    };
    /** When the receiver verified a `type` SET for `sid`, as a lag from `since`; null if not within WAIT_MS. */
    const receivedAfter = async (type: string, sid: string, since: number): Promise<number | null> => {
      while (Date.now() < since + WAIT_MS) {
        const set = (await receivedSets()).find((one) => one.verified && ofSid(one, type, sid));
        if (set) return set.at - since;
        await sleep(20);
      }
      return null;
    };
    const told = await fetch(`http://127.0.0.1:${providerPort}/ssf/receiver`, {
      method: "POST",
      body: JSON.stringify({ transmitter: base, authorization: SIGNALS_AUTHORIZATION }),
    });
    expect("the stand-in's receiver is told the transmitter", told.status === 200, told.status);
    const signedInAt = Date.now();
    const session = await signIn({ provider: UPSTREAM, subject, sid: "sid-sent-back" });
    const establishedMs = await receivedAfter("session-established", "sid-sent-back", signedInAt);
    expect(`the provider gets session-established within ${WAIT_MS} ms, verified`, establishedMs !== null);
    // From the request: the SET is pushed beside the answer and may come before it.
    const signedOutAt = Date.now();
    const loggedOut = await fetch(`${base}/auth/logout`, {
      method: "POST",
      headers: { Authorization: `Bearer ${session.token}` },
    });
    expect("the user's sign-out is answered 200", loggedOut.status === 200, loggedOut.status);
    const revokedMs = await receivedAfter("session-revoked", "sid-sent-back", signedOutAt);
    expect(`the provider gets session-revoked with its own sid within ${WAIT_MS} ms, verified`, revokedMs !== null);
    const all = await receivedSets();
    const echoes = all.filter((set) => ["sid-first", "sid-second"].some((sid) => ofSid(set, "session-revoked", sid)));
    expect("no session-revoked for the endings the provider asked for (no echo)", echoes.length === 0, echoes);
    const refused = all.filter((set) => set.error !== undefined && !set.error.startsWith("not_ready"));
    expect("every push the receiver took verified", refused.length === 0, refused);
    return { establishedMs, revokedMs, pushes: all.length };
  })();

  // IPSIE SL1, the provider's lifetime: a sign-in whose ID token's session_expiry is two minutes
  // away lives no longer. An access token minted half a minute in would live its 120 s past it,
  // and is cut to it; after it (and the verifier's 5 s of clock tolerance) whoami and the
  // verifier refuse the session, though nothing ended it.
  const providerLifetime = async () => {
    const sessionExpiry = Math.floor(Date.now() / 1000) + 120;
    const bounded = await signIn({ provider: UPSTREAM, subject, sid: "sid-lifetime", session_expiry: sessionExpiry });
    const shown = (await (
      await fetch(`${base}/auth/whoami`, { headers: { Authorization: `Bearer ${bounded.token}` } })
    ).json()) as { expires_at?: string; upstream?: { session_expiry?: string; bound?: string } };
    const expiry = new Date(sessionExpiry * 1000).toISOString();
    expect(
      "whoami says the provider's session_expiry ends the session",
      shown.expires_at === expiry &&
        shown.upstream?.session_expiry === expiry &&
        shown.upstream.bound === "session_expiry",
      shown,
    );
    await sleep(30_000);
    const minted = await fetch(`${base}/auth/token`, {
      method: "POST",
      headers: { Authorization: `Bearer ${bounded.token}` },
    });
    const { access_token: late } = (await minted.json()) as { access_token: string };
    const claims = await verifier.verify(late);
    expect("an access token minted later never outlives session_expiry", claims.exp === sessionExpiry, claims);
    expect("whoami accepts the session before session_expiry", (await whoami(bounded.token)) === 200);
    await sleep(sessionExpiry * 1000 + 6_000 - Date.now());
    const whoamiAfter = await whoami(bounded.token);
    expect("whoami refuses the session after session_expiry", whoamiAfter === 401, whoamiAfter);
    const refusals: string[] = [];
    for (const accessToken of [bounded.accessToken, late]) {
      try {
        await verifier.verify(accessToken);
        refusals.push("accepted");
      } catch (error) {
        refusals.push(error instanceof TokenRefused ? error.code : String(error));
      }
    }
    expect(
      "the verifier refuses its access tokens after session_expiry",
      refusals.every((code) => code === "invalid_token"),
      refusals,
    );
    return { sessionExpiry: expiry, whoamiAfter, verifierAfter: refusals };
  };
  const lifetime = await providerLifetime();

  console.log(
    JSON.stringify({
      backchannelLogout: { verifierRefusedMs: logoutLag },
      globalRevocation: { verifierRefusedMs: revocationLags },
      providerLifetime: lifetime,
      signOutsSentBack,
      problems,
    }),
  );
} catch (error) {
  problems.push(error instanceof Error ? error.message : String(error));
} finally {
  for (const verifier of verifiers) await verifier.stop();
  pushServer.close();
  await server.stop();
  provider.kill();
  rmSync(state, { recursive: true, force: true });
}
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exitCode = 1;
}
