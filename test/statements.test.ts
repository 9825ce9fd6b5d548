import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards } from "./d1.ts";
import {
  bearer,
  CHROME_MAC,
  callWith,
  d1,
  d1OfUser,
  databases,
  issue,
  newUser,
  ORIGIN,
  sessionCookie,
} from "./helpers.ts";
import { newOrganization, policyDatabases } from "./organization-fixtures.ts";
import { accessTokenVars } from "./ssf.ts";
import { type Operation, STATEMENTS } from "./statement-counts.ts";

// Every D1 statement is a deliberate choice: each operation's one batch is counted here,
// statement by statement, against the table ARCHITECTURE.md gives (test/statement-counts.ts).
// A browser's session (carrier both: its cookie is judged, its Bearer calls are not), used from
// the browser and network it signed in from, so the context check finds nothing changed.

const HOME = { country: "DE", asn: 3320 };
// Where Cloudflare places the address: judged too (travel), in the same statements.
const PLACE = { latitude: "50.11090", longitude: "8.68210" };
const CONTEXT = { userAgent: CHROME_MAC, ...HOME, ...PLACE };

// An upstream of SSF_UPSTREAMS (docs/shared-signals.md): its SET ends the user's sessions, with no
// token and no context, so judged or not is the same batch.
const ISSUER = "https://idp.example";
const AUDIENCE = "https://sessions.example/ssf";
const CLIENT_ID = "sessions-app";
const upstreamKey = await generateKeyPair("ES256", { extractable: true });
const UPSTREAM: Partial<Env> = {
  SSF_UPSTREAMS: JSON.stringify([
    {
      issuer: ISSUER,
      name: "idp",
      audience: AUDIENCE,
      subject: "iss_sub",
      client_id: CLIENT_ID,
      jwks: { keys: [{ ...(await exportJWK(upstreamKey.publicKey)), kid: "k1", alg: "ES256" }] },
    },
  ]),
};

/** A CAEP session-revoked SET for every session of the user the upstream's `subject` is, signed by the upstream. */
function sessionsRevoked(subject: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: ISSUER,
    aud: AUDIENCE,
    iat: now,
    jti: crypto.randomUUID(),
    sub_id: { format: "iss_sub", iss: ISSUER, sub: subject },
    events: { "https://schemas.openid.net/secevent/caep/event-type/session-revoked": { event_timestamp: now } },
  })
    .setProtectedHeader({ alg: "ES256", typ: "secevent+jwt", kid: "k1" })
    .sign(upstreamKey.privateKey);
}

/** A JWT the upstream signs: a back-channel logout token of `subject`, or a revocation request's authentication. */
function upstreamJwt(claims: Record<string, unknown>): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: ISSUER, aud: CLIENT_ID, iat: now, exp: now + 60, jti: crypto.randomUUID(), ...claims })
    .setProtectedHeader({ alg: "ES256", kid: "k1" })
    .sign(upstreamKey.privateKey);
}

/** What an upstream's route is sent: the request's headers and body, for `subject`. */
async function upstreamRequest(
  operation: Operation,
  subject: string,
): Promise<{ headers: Record<string, string>; body: string; status: number }> {
  if (operation === "POST /upstreams/:name/backchannel-logout") {
    const token = await upstreamJwt({
      sub: subject,
      events: { "http://schemas.openid.net/event/backchannel-logout": {} },
    });
    return {
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ logout_token: token }).toString(),
      status: 200,
    };
  }
  return {
    headers: {
      "Content-Type": "application/json",
      Authorization: `Bearer ${await upstreamJwt({ aud: `${ORIGIN}/upstreams/idp/global-token-revocation` })}`,
    },
    body: JSON.stringify({ sub_id: { format: "iss_sub", iss: ISSUER, sub: subject } }),
    status: 204,
  };
}

async function measure(
  operation: Operation,
  judged: boolean,
  vars: Partial<Env> = {},
  organizationId?: string,
): Promise<number> {
  const userId = newUser();
  // A member's sessions (docs/organization-policy.md) when an organization is given.
  const member = (options: object) =>
    exports.SessionService.create({ userAgent: CHROME_MAC, ...options, userId, organization: organizationId });
  const caller = organizationId
    ? await member({ ...HOME, carrier: "both" })
    : await issue(userId, { ...HOME, carrier: "both" });
  const other = organizationId ? await member(HOME) : await issue(userId, HOME);
  const counter = countingShards(databases());
  // Access tokens are off unless configured.
  const tokens = operation === "POST /auth/token" ? await accessTokenVars() : {};
  const bindings = { ...counter.env, ...tokens, ...vars };
  const service = new SessionService(createExecutionContext(), { ...env, ...bindings });
  const context = judged ? { context: CONTEXT } : {};
  if (operation === "SessionService.authenticate")
    expect(await service.authenticate(caller.token, context)).not.toBeNull();
  else if (operation === "SessionService.reauthenticate")
    expect(await service.reauthenticate({ token: caller.token, factors: ["pwd"], ...context })).not.toBeNull();
  else if (operation === "SessionService.create")
    await service.create({ userId, ...HOME, carrier: "cookie", organization: organizationId });
  else if (operation === "SessionService.create, upstream sign-in") {
    const upstream = { provider: "idp", subject: `sub-${userId}`, sid: "sid-1" };
    await new SessionService(createExecutionContext(), { ...env, ...bindings, ...UPSTREAM }).create({
      userId,
      ...HOME,
      carrier: "cookie",
      upstream,
    });
  } else if (operation.startsWith("POST /upstreams/")) {
    const subject = `sub-${userId}`;
    const upstream = { provider: "idp", subject, sid: "sid-1" };
    // Signed in uncounted: only the entry point's own statements are measured.
    await new SessionService(createExecutionContext(), { ...env, ...UPSTREAM }).create({ userId, upstream });
    const { headers, body, status } = await upstreamRequest(operation, subject);
    const path = operation.split(" ")[1]?.replace(":name", "idp") as string;
    const response = await callWith({ ...bindings, ...UPSTREAM }, "POST", path, headers, body);
    expect(response.status).toBe(status);
  } else if (operation === "SessionService.openSupportSession")
    await service.openSupportSession({ userId, agentId: "agent-ada", reason: "Ticket 1" });
  else if (operation === "SessionService.updateSessionData")
    // By id, no token: nothing to judge either way; a merge, the larger statement.
    expect(await service.updateSessionData({ sessionId: caller.id, data: { tenant: "acme" }, mode: "merge" })).toEqual({
      updated: true,
    });
  else if (operation.endsWith(" /auth/report")) {
    // No session token, no context: the report token alone, judged or not the same batch.
    const method = operation.split(" ")[0] as string;
    const response = await callWith(bindings, method, "/auth/report", bearer(caller.reportToken as string));
    expect(response.status).toBe(200);
  } else if (operation === "POST /ssf/inbound") {
    const subject = `sub-${userId}`;
    // Signed in uncounted, so that a link names the user: only the SET's own statements are measured.
    await new SessionService(createExecutionContext(), { ...env, ...UPSTREAM }).create({
      userId,
      upstream: { provider: "idp", subject },
    });
    const headers = { "Content-Type": "application/secevent+jwt" };
    const response = await callWith(
      { ...bindings, ...UPSTREAM },
      "POST",
      "/ssf/inbound",
      headers,
      await sessionsRevoked(subject),
    );
    expect(response.status).toBe(202);
  } else {
    const [method, path] = operation.split(" ") as [string, string];
    const credential = judged ? sessionCookie(caller.token) : bearer(caller.token);
    const network = { ...HOME, ...PLACE };
    const response = await callWith(bindings, method, path.replace(":id", other.id), credential, undefined, network);
    expect(response.status).toBe(200);
  }
  return counter.statements();
}

describe("statements per operation, in its one round trip", () => {
  it("as ARCHITECTURE.md's table says: judged (a browser's cookie, unchanged context) and not judged (Bearer, or RPC without a context)", async () => {
    const measured: Record<string, [number, number]> = {};
    for (const operation of Object.keys(STATEMENTS) as Operation[]) {
      measured[operation] = [await measure(operation, true), await measure(operation, false)];
    }
    expect(measured).toEqual(STATEMENTS);
  });

  it("a member's session runs the statements one outside does and the DELETE its organization's `end` needs, its policy read in them; its create reads the policy first", async () => {
    const organizationId = await newOrganization();
    const policy = {
      ttl_seconds: 3600,
      idle_timeout_seconds: 900,
      max_lifetime_seconds: 7200,
      report_ttl_seconds: 600,
    };
    for (const binding of policyDatabases())
      await d1(binding)
        .prepare(
          "UPDATE organization_policies SET ttl_seconds = ?, idle_timeout_seconds = ?, max_lifetime_seconds = ?, report_ttl_seconds = ? WHERE organization_id = ?",
        )
        .bind(...Object.values(policy), organizationId)
        .run();
    const byToken = (Object.keys(STATEMENTS) as Operation[]).filter(
      (operation) => !/create|openSupportSession|upstreams|ssf/.test(operation),
    );
    const measured: Record<string, [number, number]> = {};
    for (const operation of byToken)
      measured[operation] = [
        await measure(operation, true, {}, organizationId),
        await measure(operation, false, {}, organizationId),
      ];
    // No var here ends on a change: a judged member's batch adds the DELETE its organization's
    // policy may call for (one outside sends it where a var does, below). Those that judge no
    // change, or record it in their own statements, send what one outside does.
    const judgesNone = new Set([
      "POST /auth/logout",
      "GET /auth/report",
      "POST /auth/report",
      "SessionService.reauthenticate",
      "SessionService.updateSessionData",
    ]);
    expect(measured).toEqual(
      Object.fromEntries(
        byToken.map((operation) => {
          const [judged, bearer] = STATEMENTS[operation];
          return [operation, [judgesNone.has(operation) ? judged : judged + 1, bearer]];
        }),
      ),
    );
    // Its own round trip before the batch (test/round-trips.test.ts), one statement; and the
    // batch's read of the organization's row, which a removal since then leaves empty: one more.
    expect(await measure("SessionService.create", false, {}, organizationId)).toBe(
      STATEMENTS["SessionService.create"][1] + 2,
    );
  });

  it("a policy that can end the session adds its DELETE; one that only ignores or logs adds none", async () => {
    const [judged] = STATEMENTS["GET /auth/sessions"];
    expect(await measure("GET /auth/sessions", true, { SESSION_CONTEXT_DEVICE: "end" })).toBe(judged + 1);
    const ignoring = {
      SESSION_CONTEXT_DEVICE: "ignore",
      SESSION_CONTEXT_NETWORK: "ignore",
      SESSION_CONTEXT_TRAVEL: "ignore",
    };
    expect(await measure("GET /auth/sessions", true, ignoring)).toBe(judged - 1);
  });

  it("travel adds none: a use from across the world 20 minutes after the last is judged, logged and recorded in the same statements", async () => {
    const [judged] = STATEMENTS["GET /auth/sessions"];
    const userId = newUser();
    const { token } = await issue(userId, { ...HOME, carrier: "cookie" });
    const list = (network: object, vars: Partial<Env>) =>
      callWith(vars, "GET", "/auth/sessions", sessionCookie(token), undefined, { ...HOME, ...network });
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.UTC(2026, 10, 2, 10));
      expect((await list({ latitude: "40.71280", longitude: "-74.00600" }, {})).status).toBe(200);
      vi.setSystemTime(Date.UTC(2026, 10, 2, 10, 20));
      const counter = countingShards(databases());
      const response = await list(
        { latitude: "22.31930", longitude: "114.16940" },
        { ...counter.env, SESSION_CONTEXT_TRAVEL: "log" },
      );
      expect(response.status).toBe(200);
      expect(counter.statements()).toBe(judged);
      const travel =
        "SELECT count(*) AS n FROM session_events WHERE user_id = ? AND context ->> '$.travel' IS NOT NULL";
      expect(await (await d1OfUser(userId)).prepare(travel).bind(userId).first("n")).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });
});
