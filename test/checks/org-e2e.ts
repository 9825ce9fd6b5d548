// `npm run check:orgs`: two organizations, each with its own identity provider registered at
// runtime, end to end against the real `npm start`, as `check:idp` proves one provider of the
// var. Two stand-in providers (test/checks/idp-stand-in.ts, each a process with its own keys)
// share one issuer, as two customers of one Google Workspace do. Organization A's id is drawn
// here, so that an admin key limited to it is made before the server starts (with a key for the
// whole deployment and ORGANIZATION_SECRETS_KEYS); then, over the admin API alone: both
// organizations are created, stand-in A registered as A's provider and stand-in B as B's, each
// with `push` and its own `authorization` (sealed by the secret), and a user of each signed in
// through its provider with the SAME subject string; whoami shows each session's organization,
// and each provider is pushed its own sign-in alone. A's CAEP credential-change for that subject,
// at A's own Shared Signals URL, holds A's session alone; A's back-channel logout of it ends A's
// sessions alone; B's global token revocation of it ends B's alone (A's signed in since stays). A's limited key is answered 404 on B (its
// directory entry, providers, sessions listed or ended, a B member's session) and 200 on A; its
// ending of A's sessions is pushed back to stand-in A alone, verified with the service's JWK Set.
// Last, B's provider is removed, then A's organization (which removes its provider with it):
// each one's logout route is polled until refused (404), and each lag must stay within the
// documented 30 s (docs/organization-providers.md); the isolate that made the change forgets at
// once, another within the bound (shown with a controlled clock in test/organization-isolation.test.ts). Prints one
// JSON report; exits 1 on any answer other than the one expected.
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { freePort, startNpmStart } from "../../dev/npm-start.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");
const CLIENT_ID = "session-service";
/** One issuer for both: two organizations trusting one provider's tenant. */
const ISSUER = "https://accounts.e2e.example";
/** The `aud` of the stand-ins' SETs: what this service is known by to them. */
const SET_AUDIENCE = "https://sessions.e2e.example";
const SUBJECT = `shared-subject-${crypto.randomUUID()}`;
/** The bound docs/organization-providers.md states, and a margin for the polling itself. */
const BOUND_MS = 30_000;
const MARGIN_MS = 5_000;
const WAIT_MS = 10_000;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const state = mkdtempSync(path.join(tmpdir(), "org-e2e-"));
const problems: string[] = [];
const expect = (what: string, ok: boolean, seen: unknown = "") => {
  if (!ok) problems.push(`${what}: ${typeof seen === "string" ? seen : JSON.stringify(seen)}`);
};

interface Organization {
  label: "A" | "B";
  id: string;
  provider: string;
  authorization: string;
  standIn: StandIn;
}
interface StandIn {
  process: ReturnType<typeof spawn>;
  port: number;
}
type Received = { at: number; verified: boolean; claims: Record<string, unknown> | null; error?: string };

/** A stand-in provider in a process of its own, once it says where it listens. */
async function standIn(): Promise<StandIn> {
  const child = spawn(
    process.execPath,
    ["--disable-warning=ExperimentalWarning", path.join(import.meta.dirname, "idp-stand-in.ts"), CLIENT_ID, ISSUER],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout }).once("line", resolve));
  return { process: child, port: (JSON.parse(line) as { port: number }).port };
}
const standIns: StandIn[] = [];
const toStandIn = async (to: StandIn, what: "logout" | "revoke" | "set", body: Record<string, unknown>) => {
  const response = await fetch(`http://127.0.0.1:${to.port}/${what}`, { method: "POST", body: JSON.stringify(body) });
  return (await response.json()) as { status: number; body: string };
};
const receivedBy = async (by: StandIn) =>
  (await (await fetch(`http://127.0.0.1:${by.port}/ssf/received`)).json()) as Received[];

const command = async (script: string, args: string[], env: Record<string, string> = {}) => {
  const { stdout } = await run("npm", ["run", "--silent", script, "--", ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  return stdout;
};
const drawnId = () => `org_${randomBytes(16).toString("base64url")}`;

let server: Awaited<ReturnType<typeof startNpmStart>> | null = null;
try {
  standIns.push(await standIn(), await standIn());
  const [a, b]: Organization[] = (["A", "B"] as const).map((label, index) => ({
    label,
    id: drawnId(),
    provider: `org-e2e-${label.toLowerCase()}-${Date.now()}`,
    authorization: `Bearer e2e-org-${label.toLowerCase()}-signals`,
    standIn: standIns[index] as StandIn,
  })) as [Organization, Organization];

  const keysEnv = { ADMIN_KEYS_FILE: path.join(state, "admin-keys.json") };
  const keyOf = async (args: string[]) =>
    (JSON.parse(await command("admin:keys", args, keysEnv)) as { key: string }).key;
  const scopes = ["organizations", "sessions:create", "sessions:read", "sessions:end"].flatMap((s) => ["--scope", s]);
  const deploymentKey = await keyOf(["create", "--name", "deployment", ...scopes]);
  const limitedKey = await keyOf(["create", "--name", "organization A", ...scopes, "--organization", a.id]);
  const secretsKeys = (await command("organization:keys", ["new"])).trim();
  const varsFile = path.join(state, "vars.env");
  writeFileSync(varsFile, `ORGANIZATION_SECRETS_KEYS='${secretsKeys}'\n`, { mode: 0o600 });

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  server = await startNpmStart(port, path.join(state, "npm-start"), ["--env-file", varsFile], keysEnv);

  const admin = async (key: string, method: string, route: string, body?: unknown) => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: {
        Authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> | null };
  };
  const whoami = async (token: string) => {
    const response = await fetch(`${base}/auth/whoami`, { headers: { Authorization: `Bearer ${token}` } });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  const live = async (token: string) => (await whoami(token)).status;

  // The organizations and their providers, at runtime.
  for (const organization of [a, b]) {
    const created = await admin(deploymentKey, "POST", "/admin/organizations", {
      id: organization.id,
      name: `Customer ${organization.label}`,
    });
    expect(`organization ${organization.label} is created: 201`, created.status === 201, created);
    const told = await fetch(`http://127.0.0.1:${organization.standIn.port}/ssf/receiver`, {
      method: "POST",
      body: JSON.stringify({ transmitter: base, authorization: organization.authorization }),
    });
    expect(`stand-in ${organization.label}'s receiver is told the transmitter`, told.status === 200, told.status);
    const registered = await admin(deploymentKey, "POST", `/admin/organizations/${organization.id}/providers`, {
      name: organization.provider,
      issuer: ISSUER,
      client_id: CLIENT_ID,
      audience: SET_AUDIENCE,
      subject: "iss_sub",
      jwks_uri: `http://127.0.0.1:${organization.standIn.port}/jwks`,
      push: { endpoint_url: `http://127.0.0.1:${organization.standIn.port}/ssf/push` },
      authorization: organization.authorization,
    });
    expect(
      `stand-in ${organization.label} is registered as ${organization.label}'s provider, its secret never shown: 201`,
      registered.status === 201 &&
        registered.body?.organizationId === organization.id &&
        JSON.stringify(registered.body?.authorization) === '{"set":true}' &&
        !JSON.stringify(registered.body).includes("e2e-org-"),
      registered,
    );
  }

  // A user of each signs in through its organization's provider, with the same subject there.
  const signIn = async (organization: Organization, sid: string) => {
    const user = `org-e2e-${organization.label.toLowerCase()}-${Date.now()}`;
    const created = await admin(deploymentKey, "POST", "/admin/sessions", {
      userId: user,
      upstream: { provider: organization.provider, subject: SUBJECT, sid },
    });
    if (created.status !== 201)
      throw new Error(`POST /admin/sessions answered ${created.status}: ${JSON.stringify(created.body)}`);
    const { id, token } = created.body as { id: string; token: string };
    return { id, token, user, sid };
  };
  const signedInAt = Date.now();
  const inA = await signIn(a, "sid-a-1");
  const inB = await signIn(b, "sid-b-1");
  for (const [organization, session] of [
    [a, inA],
    [b, inB],
  ] as const) {
    const shown = await whoami(session.token);
    expect(
      `whoami shows ${organization.label}'s session in ${organization.label}, through its provider`,
      shown.status === 200 &&
        shown.body.organization === organization.id &&
        (shown.body.upstream as { provider?: string } | undefined)?.provider === organization.provider,
      shown,
    );
  }

  /** SETs a stand-in verified naming `sid` as `type` (a CAEP event's last path segment). */
  const setsFor = async (to: StandIn, type: string, sid: string) =>
    (await receivedBy(to)).filter((set) => {
      const named = set.claims?.sub_id as { user?: { sub?: string }; session?: { id?: string } } | undefined;
      return (
        set.verified &&
        Object.keys((set.claims?.events as object | undefined) ?? {}).some((event) => event.endsWith(`/${type}`)) &&
        named?.user?.sub === SUBJECT &&
        named.session?.id === sid
      );
    });
  /** When `to` verified a `type` SET for `sid`, as a lag from `since`; null if not within WAIT_MS. */
  const receivedAfter = async (to: StandIn, type: string, sid: string, since: number) => {
    while (Date.now() < since + WAIT_MS) {
      const [set] = await setsFor(to, type, sid);
      if (set) return set.at - since;
      await sleep(50);
    }
    return null;
  };
  const establishedMs = [
    await receivedAfter(a.standIn, "session-established", inA.sid, signedInAt),
    await receivedAfter(b.standIn, "session-established", inB.sid, signedInAt),
  ];
  expect(
    `each provider gets its own sign-in's session-established within ${WAIT_MS} ms`,
    !establishedMs.includes(null),
  );
  const crossed = [
    ...(await setsFor(a.standIn, "session-established", inB.sid)),
    ...(await setsFor(b.standIn, "session-established", inA.sid)),
  ];
  expect("no provider gets the other organization's sign-in", crossed.length === 0, crossed);

  // A's CAEP credential-change for the shared subject, at its own Shared Signals URL: A's session
  // alone is held for re-authentication.
  const held = await signIn(a, "sid-a-held");
  const pushed = await toStandIn(a.standIn, "set", {
    target: `${base}/ssf/inbound/${a.provider}`,
    audience: SET_AUDIENCE,
    event: "credential-change",
    sub: SUBJECT,
    claims: { credential_type: "password", change_type: "update" },
  });
  expect("provider A's credential-change SET is answered 202", pushed.status === 202, pushed);
  const heldA = await whoami(held.token);
  const afterSet = { a: `${heldA.status} ${heldA.body.code}`, b: await live(inB.token) };
  expect(
    "A's credential-change holds A's session (401 reauthentication_required), not B's of the same subject (200)",
    afterSet.a === "401 reauthentication_required" && afterSet.b === 200,
    afterSet,
  );

  // A's back-channel logout of the shared subject: A's session alone ends.
  const logoutOf = (organization: Organization) => `${base}/upstreams/${organization.provider}/backchannel-logout`;
  const logout = await toStandIn(a.standIn, "logout", { target: logoutOf(a), sub: SUBJECT });
  expect("provider A's back-channel logout is answered 200", logout.status === 200, logout);
  const afterLogout = { a: [await live(inA.token), await live(held.token)], b: await live(inB.token) };
  expect(
    "A's logout ends A's sessions of the subject (401) and not B's (200)",
    JSON.stringify(afterLogout) === JSON.stringify({ a: [401, 401], b: 200 }),
    afterLogout,
  );

  // B's global token revocation of the same subject: B's alone, A's signed in since stays.
  const inAgain = await signIn(a, "sid-a-2");
  const revocation = await toStandIn(b.standIn, "revoke", {
    target: `${base}/upstreams/${b.provider}/global-token-revocation`,
    sub: SUBJECT,
  });
  expect("provider B's global token revocation is answered 204", revocation.status === 204, revocation);
  const afterRevocation = { a: await live(inAgain.token), b: await live(inB.token) };
  expect(
    "B's revocation ends B's session (401) and not A's of the same subject (200)",
    afterRevocation.a === 200 && afterRevocation.b === 401,
    afterRevocation,
  );

  // A's own key: B does not exist for it; A does.
  const inB2 = await signIn(b, "sid-b-2");
  const limited = {
    read: [
      (await admin(limitedKey, "GET", `/admin/organizations/${b.id}`)).status,
      (await admin(limitedKey, "GET", `/admin/organizations/${a.id}`)).status,
    ],
    providers: [
      (await admin(limitedKey, "GET", `/admin/organizations/${b.id}/providers`)).status,
      (await admin(limitedKey, "GET", `/admin/organizations/${a.id}/providers`)).status,
    ],
    removeProvider: (await admin(limitedKey, "DELETE", `/admin/organizations/${b.id}/providers/${b.provider}`)).status,
    listSessions: [
      (await admin(limitedKey, "GET", `/admin/organizations/${b.id}/sessions`)).status,
      (await admin(limitedKey, "GET", `/admin/organizations/${a.id}/sessions`)).status,
    ],
    endSessions: (await admin(limitedKey, "POST", `/admin/organizations/${b.id}/sessions/end`, { reason: "e2e" }))
      .status,
    endSession: (await admin(limitedKey, "POST", `/admin/sessions/${inB2.id}/end`, { reason: "e2e" })).status,
  };
  expect(
    "A's key: 404 on B's organization, providers and sessions, 200 on A's",
    JSON.stringify(limited) ===
      JSON.stringify({
        read: [404, 200],
        providers: [404, 200],
        removeProvider: 404,
        listSessions: [404, 200],
        endSessions: 404,
        endSession: 404,
      }),
    limited,
  );
  const listedByA = await admin(limitedKey, "GET", `/admin/organizations/${a.id}/sessions`);
  const listedIds = ((listedByA.body?.sessions as { id: string }[] | undefined) ?? []).map((session) => session.id);
  expect("A's key lists A's live session alone", JSON.stringify(listedIds) === JSON.stringify([inAgain.id]), listedByA);
  const bProvider = await admin(deploymentKey, "GET", `/admin/organizations/${b.id}/providers/${b.provider}`);
  expect(
    "B's provider and session outlive A's key's attempts",
    bProvider.status === 200 && (await live(inB2.token)) === 200,
  );

  // A's key ends A's sessions: sent back to A's provider, verified there, and to no other.
  const endedAt = Date.now();
  const ended = await admin(limitedKey, "POST", `/admin/organizations/${a.id}/sessions/end`, { reason: "e2e" });
  expect("A's key ends A's sessions: 200, complete", ended.status === 200 && ended.body?.complete === true, ended);
  const afterEnd = { a: await live(inAgain.token), b: await live(inB2.token) };
  expect("A's ending ends A's session (401), not B's (200)", afterEnd.a === 401 && afterEnd.b === 200, afterEnd);
  const revokedMs = await receivedAfter(a.standIn, "session-revoked", inAgain.sid, endedAt);
  expect(`provider A gets session-revoked for its own sid within ${WAIT_MS} ms, verified`, revokedMs !== null);
  const echoes = [
    ...(await setsFor(a.standIn, "session-revoked", inA.sid)),
    ...(await setsFor(a.standIn, "session-revoked", held.sid)),
    ...(await setsFor(b.standIn, "session-revoked", inB.sid)),
    ...(await setsFor(b.standIn, "session-revoked", inAgain.sid)),
  ];
  expect("no session-revoked for a provider's own endings, nor to the other organization", echoes.length === 0, echoes);
  const unverified = [...(await receivedBy(a.standIn)), ...(await receivedBy(b.standIn))].filter(
    (set) => !set.verified,
  );
  expect("every push either provider took verified", unverified.length === 0, unverified);

  /**
   * After `remove` (answered `removedStatus`): how long `organization`'s logout route kept
   * answering 200 (and how many times it was asked), once it answered 404 within the bound.
   */
  const refusedAfter = async (
    organization: Organization,
    what: string,
    removedStatus: number,
    remove: () => Promise<number>,
  ) => {
    const nobody = { target: logoutOf(organization), sub: "nobody-signed-in" };
    const before = await toStandIn(organization.standIn, "logout", nobody);
    expect(`${organization.label}'s logout route answers 200 before ${what}`, before.status === 200, before);
    const status = await remove();
    const removedAt = Date.now();
    expect(`${what}: ${removedStatus}`, status === removedStatus, status);
    for (let polls = 1; Date.now() < removedAt + BOUND_MS + MARGIN_MS; polls += 1) {
      const sent = await toStandIn(organization.standIn, "logout", nobody);
      const refusedAfterMs = Date.now() - removedAt;
      if (sent.status === 404 && refusedAfterMs <= BOUND_MS + MARGIN_MS) return { refusedAfterMs, polls };
      expect(`${organization.label}'s logout route answers 200 until refused`, sent.status === 200, sent);
      await sleep(250);
    }
    problems.push(
      `after ${what}, ${organization.label}'s logout route is not refused within ${BOUND_MS} ms (and ${MARGIN_MS} ms of polling)`,
    );
    return { refusedAfterMs: null, polls: null };
  };

  // B's provider removed: the isolate that removes it forgets it at once; others within the bound.
  const providerRemoved = await refusedAfter(b, "B's provider removed", 200, async () => {
    const removed = await admin(deploymentKey, "DELETE", `/admin/organizations/${b.id}/providers/${b.provider}`);
    return removed.body?.removed === true ? removed.status : 0;
  });
  const afterRemoval = await admin(deploymentKey, "POST", "/admin/sessions", {
    userId: inB.user,
    upstream: { provider: b.provider, subject: SUBJECT, sid: "sid-b-3" },
  });
  expect("a sign-in through the removed provider is refused 400", afterRemoval.status === 400, afterRemoval);

  // A's organization removed: its provider goes with it, forgotten at once by this isolate.
  const organizationRemoved = await refusedAfter(
    a,
    "A's organization removed",
    204,
    async () => (await admin(deploymentKey, "DELETE", `/admin/organizations/${a.id}`)).status,
  );
  const limitedAfter = (await admin(limitedKey, "GET", `/admin/organizations/${a.id}`)).status;
  expect("A's key finds its removed organization no more: 404", limitedAfter === 404, limitedAfter);

  console.log(
    JSON.stringify({
      organizations: { a: a.id, b: b.id },
      sessionEstablishedMs: establishedMs,
      afterCredentialChangeByA: afterSet,
      afterLogoutByA: afterLogout,
      afterRevocationByB: afterRevocation,
      limitedKeyOfA: limited,
      afterEndByA: { ...afterEnd, sessionRevokedToAMs: revokedMs },
      boundMs: BOUND_MS,
      providerRemoved,
      organizationRemoved,
      problems,
    }),
  );
} catch (error) {
  problems.push(error instanceof Error ? error.message : String(error));
} finally {
  await server?.stop();
  for (const one of standIns) one.process.kill();
  rmSync(state, { recursive: true, force: true });
}
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exitCode = 1;
}
