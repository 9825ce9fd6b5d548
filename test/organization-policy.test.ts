import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openShards } from "../src/db/shards.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { fillPolicyRows } from "../src/services/organizations/directory.ts";
import { countingShards, faultyD1 } from "./d1.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  callWith,
  d1,
  d1OfUser,
  databases,
  expectError,
  FIREFOX_WINDOWS,
  type Issued,
  issue,
  type Network,
  newUser,
  REJECTED_CHALLENGE,
  scopeWith,
  sessionCookie,
} from "./helpers.ts";
import { admin, adminKey, newOrganization, policyDatabases, removeOrganization } from "./organization-fixtures.ts";

// An organization's session policy (docs/organization-policy.md): set over the admin API, it
// governs its members' sessions at issue and, from their next request, live ones; a session
// outside any organization, in the same database, is governed by the vars alone.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const START = new Date("2026-11-22T10:00:00.000Z").getTime();

/** Sets the organization's policy over the admin API, expecting it taken. */
async function setPolicy(organization: string, policy: Record<string, unknown>, vars: Partial<Env> = {}) {
  const { vars: keys, key } = await adminKey();
  const response = await admin({ ...vars, ...keys }, key, "PUT", `/admin/organizations/${organization}/policy`, policy);
  expect(response.status).toBe(200);
}

/** A member's session, issued in this isolate: a refusal over the RPC's loopback is also reported as uncaught there. */
function issueMember(userId: string, organizationId: string, options: { ttlSeconds?: number } = {}) {
  const service = new SessionService(createExecutionContext(), env);
  return service.create({ userId, organization: organizationId, userAgent: CHROME_MAC, ...options });
}

function issueOutside(userId: string, options: { ttlSeconds?: number } = {}) {
  return exports.SessionService.create({ userId, userAgent: CHROME_MAC, ...options });
}

/** The status of the session's next request, with `vars` (the deployment's, by default). */
async function statusOf(token: string, vars: Partial<Env> = {}): Promise<number> {
  return (await callWith(vars, "GET", "/auth/sessions", bearer(token))).status;
}

const NO_POLICY = {
  ttlSeconds: null,
  idleTimeoutSeconds: null,
  slidingTtl: null,
  maxLifetimeSeconds: null,
  maxPerUser: null,
  stepUpMaxAgeSeconds: null,
  contextDevice: null,
  contextNetwork: null,
  contextTravel: null,
  travelMaxKmh: null,
  travelMinKm: null,
  reportTtlSeconds: null,
};

// wrangler.toml's vars, which the tests run with.
const THE_VARS = {
  ttlSeconds: 2_592_000,
  idleTimeoutSeconds: 1_209_600,
  slidingTtl: false,
  maxLifetimeSeconds: 34_560_000,
  maxPerUser: 50,
  stepUpMaxAgeSeconds: 0,
  contextPolicies: { device: "hold", network: "log", travel: "hold" },
  travelLimits: { maxKmh: 1000, minKm: 2000 },
  reportTtlSeconds: 86_400,
};

const NOT_FOUND = { code: "not_found", message: "No such endpoint." };
const INVALID = (detail: string) => ({
  code: "invalid_input",
  message: "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
  detail,
});

describe("organization policy: the admin API", () => {
  it("reads an organization's policy: each setting null until set, and the vars' values as the ones that apply", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    const { vars, key } = await adminKey();
    const response = await admin(vars, key, "GET", `/admin/organizations/${organization}/policy`);
    expect(response.status).toBe(200);
    expect(response.headers.get("Cache-Control")).toBe("no-store");
    expect(await response.json()).toEqual({
      organizationId: organization,
      policy: NO_POLICY,
      effective: THE_VARS,
      updatedAt: "2026-11-22T10:00:00.000Z",
    });
  });

  it("replaces the policy on every database, answers it and the values that apply; a member omitted is the var's", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    const { vars, key } = await adminKey();
    const path = `/admin/organizations/${organization}/policy`;
    vi.setSystemTime(START + 1000);
    const policy = {
      ttlSeconds: 28_800,
      idleTimeoutSeconds: 900,
      maxLifetimeSeconds: 43_200,
      maxPerUser: 3,
      stepUpMaxAgeSeconds: 0,
      contextDevice: "end",
      contextNetwork: null,
      travelMinKm: 500,
      reportTtlSeconds: 3600,
    };
    const written = await admin(vars, key, "PUT", path, policy);
    expect(written.status).toBe(200);
    const expected = {
      organizationId: organization,
      policy: { ...NO_POLICY, ...policy },
      effective: {
        ...THE_VARS,
        ttlSeconds: 28_800,
        idleTimeoutSeconds: 900,
        maxLifetimeSeconds: 43_200,
        maxPerUser: 3,
        stepUpMaxAgeSeconds: 0,
        contextPolicies: { device: "end", network: "log", travel: "hold" },
        travelLimits: { maxKmh: 1000, minKm: 500 },
        reportTtlSeconds: 3600,
      },
      updatedAt: "2026-11-22T10:00:01.000Z",
    };
    expect(await written.json()).toEqual(expected);
    expect(await (await admin(vars, key, "GET", path)).json()).toEqual(expected);
    for (const binding of policyDatabases()) {
      const row = await d1(binding)
        .prepare(
          "SELECT ttl_seconds, idle_timeout_seconds, max_per_user, context_device, context_network, updated_at FROM organization_policies WHERE organization_id = ?",
        )
        .bind(organization)
        .first();
      expect({ binding, row }).toEqual({
        binding,
        row: {
          ttl_seconds: 28_800,
          idle_timeout_seconds: 900,
          max_per_user: 3,
          context_device: "end",
          context_network: null,
          updated_at: START + 1000,
        },
      });
    }
    // A PUT replaces the whole policy: what it omits is the var's again. A retry writes the same.
    for (let i = 0; i < 2; i++) {
      const cleared = await admin(vars, key, "PUT", path, { idleTimeoutSeconds: 0 });
      expect(await cleared.json()).toMatchObject({
        policy: { ...NO_POLICY, idleTimeoutSeconds: 0 },
        effective: { ...THE_VARS, idleTimeoutSeconds: 0 },
      });
    }
  });

  it("a write that failed on one database (503) is safe to retry: every database ends with the policy", async () => {
    const organization = await newOrganization();
    const { vars, key } = await adminKey();
    const path = `/admin/organizations/${organization}/policy`;
    const last = policyDatabases().at(-1) as string;
    // Committed, then the answer lost, twice over (the retry too): the call cannot tell.
    const broken = { [last]: faultyD1(d1(last), ["after", "after"]).db } as Partial<Env>;
    const failed = await admin({ ...vars, ...broken }, key, "PUT", path, { maxPerUser: 5 });
    expect(failed.status).toBe(503);
    expect(await failed.json()).toEqual({ code: "service_unavailable", message: expect.any(String) });
    const retried = await admin(vars, key, "PUT", path, { maxPerUser: 5 });
    expect(retried.status).toBe(200);
    for (const binding of policyDatabases())
      expect({
        binding,
        row: await d1(binding)
          .prepare("SELECT max_per_user FROM organization_policies WHERE organization_id = ?")
          .bind(organization)
          .first(),
      }).toEqual({ binding, row: { max_per_user: 5 } });
  });

  it("refuses bad input with 400 naming the member, and writes nothing", async () => {
    const organization = await newOrganization();
    const { vars, key } = await adminKey();
    const path = `/admin/organizations/${organization}/policy`;
    await setPolicy(organization, { ttlSeconds: 3600 });
    const before = await Promise.all(
      policyDatabases().map((binding) =>
        d1(binding).prepare("SELECT * FROM organization_policies WHERE organization_id = ?").bind(organization).first(),
      ),
    );
    const cases: [unknown, string][] = [
      [{ ttlSeconds: 0 }, "ttlSeconds must be an integer >= 1 (or null: SESSION_TTL_SECONDS)"],
      [{ ttlSeconds: 1.5 }, "ttlSeconds must be an integer >= 1 (or null: SESSION_TTL_SECONDS)"],
      [{ ttlSeconds: "3600" }, "ttlSeconds must be an integer >= 1 (or null: SESSION_TTL_SECONDS)"],
      [
        { idleTimeoutSeconds: -1 },
        "idleTimeoutSeconds must be an integer >= 0 (or null: SESSION_IDLE_TIMEOUT_SECONDS)",
      ],
      [
        { maxLifetimeSeconds: 34_560_001 },
        "maxLifetimeSeconds must be <= 34560000 (or null: SESSION_MAX_LIFETIME_SECONDS)",
      ],
      [{ maxPerUser: 0 }, "maxPerUser must be an integer >= 1 (or null: SESSION_MAX_PER_USER)"],
      [{ reportTtlSeconds: 59 }, "reportTtlSeconds must be an integer >= 60 (or null: SESSION_REPORT_TTL_SECONDS)"],
      [{ travelMaxKmh: 0 }, "travelMaxKmh must be an integer >= 1 (or null: SESSION_TRAVEL_MAX_KMH)"],
      [{ contextDevice: "step-up" }, "contextDevice must be one of ignore, log, hold, end (or null)"],
      [{ contextTravel: 1 }, "contextTravel must be one of ignore, log, hold, end (or null)"],
      [{ slidingTtl: "true" }, "slidingTtl must be a boolean (or null)"],
      // Across members, on the values that would apply: the var's 30 days over a maximum of an hour.
      [
        { maxLifetimeSeconds: 3600 },
        "ttlSeconds must be <= maxLifetimeSeconds (as they would apply: 2592000 and 3600)",
      ],
      [
        { ttlSeconds: 7200, maxLifetimeSeconds: 3600 },
        "ttlSeconds must be <= maxLifetimeSeconds (as they would apply: 7200 and 3600)",
      ],
      [
        { reportTtlSeconds: 90 * 86_400 + 1 },
        "reportTtlSeconds must be <= SESSION_EVENTS_RETENTION_DAYS in seconds (7776000)",
      ],
      [
        { lifetime: 3600 },
        "lifetime is not a member this call takes (ttlSeconds, idleTimeoutSeconds, slidingTtl, maxLifetimeSeconds, maxPerUser, stepUpMaxAgeSeconds, contextDevice, contextNetwork, contextTravel, travelMaxKmh, travelMinKm, reportTtlSeconds)",
      ],
    ];
    for (const [body, detail] of cases) {
      const response = await admin(vars, key, "PUT", path, body);
      expect({ body, status: response.status, answer: await response.json() }).toEqual({
        body,
        status: 400,
        answer: {
          code: "invalid_input",
          message:
            "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
          detail,
        },
      });
    }
    const after = await Promise.all(
      policyDatabases().map((binding) =>
        d1(binding).prepare("SELECT * FROM organization_policies WHERE organization_id = ?").bind(organization).first(),
      ),
    );
    expect(after).toEqual(before);
  });

  it("answers 404 for an organization without a policy, and for one outside the key's, logged; 403 without the scope", async () => {
    const organization = await newOrganization();
    const other = await newOrganization();
    const { vars, key } = await adminKey();
    for (const [missing, status, answer] of [
      [`org_${"x".repeat(22)}`, 404, NOT_FOUND],
      // Of the wrong form: the id's rule, as on every organization route.
      ["not-an-id", 400, INVALID("id must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -")],
    ] as const) {
      for (const [method, body] of [
        ["GET", undefined],
        ["PUT", { ttlSeconds: 60 }],
      ] as const) {
        const response = await admin(vars, key, method, `/admin/organizations/${missing}/policy`, body);
        expect({ method, status: response.status, body: await response.json() }).toEqual({
          method,
          status,
          body: answer,
        });
      }
    }
    const limited = await adminKey(["organizations"], organization);
    const log = vi.spyOn(console, "warn");
    const outside = await admin(limited.vars, limited.key, "PUT", `/admin/organizations/${other}/policy`, {
      ttlSeconds: 60,
    });
    expect(outside.status).toBe(404);
    expect(await outside.json()).toEqual(NOT_FOUND);
    expect(log.mock.calls.map(([line]) => JSON.parse(String(line)))).toContainEqual(
      expect.objectContaining({ event: "admin_key_outside", key: limited.id, organization }),
    );
    const row = await d1("DB")
      .prepare("SELECT ttl_seconds FROM organization_policies WHERE organization_id = ?")
      .bind(other)
      .first();
    expect(row).toEqual({ ttl_seconds: null });
    const own = await admin(limited.vars, limited.key, "GET", `/admin/organizations/${organization}/policy`);
    expect(own.status).toBe(200);
    const unscoped = await adminKey(["sessions:read"]);
    const refused = await admin(unscoped.vars, unscoped.key, "GET", `/admin/organizations/${organization}/policy`);
    expect(refused.status).toBe(403);
  });
});

describe("organization policy: at issue", () => {
  it("a member's session is issued with its organization's lifetime, never longer; a session outside, the var's", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    await setPolicy(organization, { ttlSeconds: 28_800 });
    const user = newUser();
    expect((await issueMember(user, organization)).expiresAt).toBe("2026-11-22T18:00:00.000Z");
    expect((await issueMember(user, organization, { ttlSeconds: 600 })).expiresAt).toBe("2026-11-22T10:10:00.000Z");
    // The login flow's "remember me" does not outlast the organization's rule.
    const remembered = await issueMember(user, organization, { ttlSeconds: 86_400 });
    expect(remembered.expiresAt).toBe("2026-11-22T18:00:00.000Z");
    expect(remembered.cookie).toContain("; Max-Age=28800;");
    expect((await issueOutside(newUser())).expiresAt).toBe("2026-12-22T10:00:00.000Z");
  });

  it("a ttlSeconds over the organization's maximum lifetime is refused, nothing written", async () => {
    const organization = await newOrganization();
    await setPolicy(organization, { ttlSeconds: 600, maxLifetimeSeconds: 3600 });
    const user = newUser();
    await expect(issueMember(user, organization, { ttlSeconds: 3601 })).rejects.toMatchObject({
      name: "RangeError",
      message: "ttlSeconds must be an integer from 1 to 3600",
    });
    const db = d1(await bindingOfUser(user));
    expect(await db.prepare("SELECT count(*) AS n FROM sessions WHERE user_id = ?").bind(user).first()).toEqual({
      n: 0,
    });
  });

  it("sessions per user: the organization's cap evicts the member's least recently active session in it, none outside it", async () => {
    const organization = await newOrganization();
    await setPolicy(organization, { maxPerUser: 2 });
    const user = newUser();
    const first = await issueMember(user, organization);
    const second = await issueMember(user, organization);
    const third = await issueMember(user, organization);
    expect([await statusOf(first.token), await statusOf(second.token), await statusOf(third.token)]).toEqual([
      401, 200, 200,
    ]);
    // The same user's sessions outside the organization neither count nor are evicted.
    const own = [await issueOutside(user), await issueOutside(user), await issueOutside(user)];
    const fourth = await issueMember(user, organization);
    expect(await Promise.all([...own, second, fourth].map((session) => statusOf(session.token)))).toEqual([
      200, 200, 200, 401, 200,
    ]);
  });

  it("the report link lives as long as the organization's report lifetime says", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    await setPolicy(organization, { reportTtlSeconds: 600 });
    const member = await issueMember(newUser(), organization);
    const outside = await issueOutside(newUser());
    const report = (token: string) =>
      callWith({}, "GET", "/auth/report", { Authorization: `Bearer ${token}` }).then((response) => response.status);
    expect([await report(member.reportToken!), await report(outside.reportToken!)]).toEqual([200, 200]);
    vi.setSystemTime(START + 601_000);
    expect(await report(member.reportToken!)).toBe(410);
    expect(await report(outside.reportToken!)).toBe(200);
  });

  it("a create naming an organization without a policy row is refused; an id of the wrong form too", async () => {
    const organization = await newOrganization();
    await removeOrganization(organization);
    await expect(issueMember(newUser(), organization)).rejects.toMatchObject({
      name: "RangeError",
      message: `organization ${organization} names no organization of this service`,
    });
    await expect(issueMember(newUser(), "acme")).rejects.toMatchObject({
      name: "TypeError",
      message: "organization must be an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -",
    });
  });
});

describe("organization policy: a database without the rows (npm run org -- sync-policies)", () => {
  const rowOf = (binding: string, organization: string) =>
    d1(binding).prepare("SELECT * FROM organization_policies WHERE organization_id = ?").bind(organization).first();
  const idsOn = async (binding: string) =>
    new Set(
      (await d1(binding).prepare("SELECT organization_id FROM organization_policies").all()).results.map(
        (row) => row.organization_id,
      ),
    );

  it("writes each database the rows DB holds and it lacks, as DB holds them, keeps a row it has, and again writes nothing", async () => {
    const [missing, kept] = [await newOrganization("Initech"), await newOrganization("Globex")];
    await setPolicy(missing, { ttlSeconds: 3600 });
    const others = policyDatabases().filter((binding) => binding !== "DB");
    // Each other database as one added to SHARDS after `missing` was created; `kept`'s row there
    // has a value of its own, which the fill must not touch.
    for (const binding of others) {
      await d1(binding).prepare("DELETE FROM organization_policies WHERE organization_id = ?").bind(missing).run();
      await d1(binding)
        .prepare("UPDATE organization_policies SET max_per_user = 7 WHERE organization_id = ?")
        .bind(kept)
        .run();
    }
    // A member's sign-in on such a database is refused: it holds no row of the organization.
    const user = others.length === 0 ? null : await userOutsideDb();
    if (user) await expect(issueMember(user, missing)).rejects.toMatchObject({ name: "RangeError" });
    const keptRows = await Promise.all(others.map((binding) => rowOf(binding, kept)));
    const onDb = await idsOn("DB");
    const lacking = Object.fromEntries(
      await Promise.all(
        others.map(async (binding) => {
          const there = await idsOn(binding);
          return [binding, [...onDb].filter((id) => !there.has(id)).length] as const;
        }),
      ),
    );

    const counter = countingShards(databases());
    expect(await fillPolicyRows(scopeWith(openShards({ ...env, ...counter.env })))).toEqual({ filled: lacking });
    // One page of DB's rows, then one batch on each other database.
    expect(counter.roundTrips()).toEqual(Object.fromEntries(policyDatabases().map((binding) => [binding, 1])));
    const reference = await rowOf("DB", missing);
    for (const binding of others) {
      expect(lacking[binding]).toBeGreaterThanOrEqual(1);
      expect(await rowOf(binding, missing)).toEqual(reference);
      expect(await idsOn(binding)).toEqual(onDb);
    }
    expect(await Promise.all(others.map((binding) => rowOf(binding, kept)))).toEqual(keptRows);
    if (user) {
      const member = await issueMember(user, missing);
      expect(await statusOf(member.token)).toBe(200);
    }

    expect(await fillPolicyRows(scopeWith(openShards(env)))).toEqual({
      filled: Object.fromEntries(others.map((binding) => [binding, 0])),
    });
  });
});

/** A user whose sessions live on a database other than DB. */
async function userOutsideDb(): Promise<string> {
  for (;;) {
    const user = newUser();
    if ((await bindingOfUser(user)) !== "DB") return user;
  }
}

describe("organization policy: live sessions, from their next request", () => {
  it("a shorter idle timeout ends an idle member's session at its next request; one outside is untouched", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    const member = await issueMember(newUser(), organization);
    const outside = await issueOutside(newUser());
    vi.setSystemTime(START + 600_000);
    expect(await statusOf(member.token)).toBe(200);
    await setPolicy(organization, { idleTimeoutSeconds: 900 });
    // Active at +600 s (written: the activity is 5 minutes stale): idle until +1500 s.
    vi.setSystemTime(START + 1_499_999);
    expect(await statusOf(member.token)).toBe(200);
    vi.setSystemTime(START + 1_499_999 + 900_000);
    expect(await statusOf(member.token)).toBe(401);
    expect(await statusOf(outside.token)).toBe(200);
    // 0: no idle timeout, whatever the var's.
    const again = await issueMember(newUser(), organization);
    await setPolicy(organization, { idleTimeoutSeconds: 0 });
    vi.setSystemTime(START + 1_499_999 + 900_000 + 1_209_600_000);
    expect(await statusOf(again.token)).toBe(200);
  });

  it("a shorter lifetime ends a member's session at its next request, no sign-in needed; one outside is untouched", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    const member = await issueMember(newUser(), organization);
    const outside = await issueOutside(newUser());
    await setPolicy(organization, { ttlSeconds: 3600 });
    vi.setSystemTime(START + 3_599_999);
    expect(await statusOf(member.token)).toBe(200);
    vi.setSystemTime(START + 3_600_000);
    expect(await statusOf(member.token)).toBe(401);
    expect(await statusOf(outside.token)).toBe(200);
  });

  it("a shorter maximum lifetime ends a sliding member's session at its next request; one outside slides on", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const sliding = { SESSION_SLIDING_TTL: "true" } as Partial<Env>;
    const organization = await newOrganization();
    await setPolicy(organization, { ttlSeconds: 600, maxLifetimeSeconds: 3600 }, sliding);
    const member = await issueMember(newUser(), organization);
    const outside = await exports.SessionService.create({ userId: newUser(), ttlSeconds: 600 });
    // Each use renews both: now + 600 s.
    for (const at of [400_000, 800_000]) {
      vi.setSystemTime(START + at);
      expect([await statusOf(member.token, sliding), await statusOf(outside.token, sliding)]).toEqual([200, 200]);
    }
    await setPolicy(organization, { ttlSeconds: 600, maxLifetimeSeconds: 900 }, sliding);
    vi.setSystemTime(START + 899_999);
    expect(await statusOf(member.token, sliding)).toBe(200);
    vi.setSystemTime(START + 900_000);
    expect(await statusOf(member.token, sliding)).toBe(401);
    expect(await statusOf(outside.token, sliding)).toBe(200);
  });

  it("a member's sliding session renews by its organization's lifetime, and stops sliding when its policy says", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const sliding = { SESSION_SLIDING_TTL: "true" } as Partial<Env>;
    const organization = await newOrganization();
    await setPolicy(organization, { ttlSeconds: 600 }, sliding);
    const member = await issueMember(newUser(), organization);
    vi.setSystemTime(START + 400_000);
    expect(await statusOf(member.token, sliding)).toBe(200);
    // Renewed at +400 s: until +1000 s.
    vi.setSystemTime(START + 999_999);
    expect(await statusOf(member.token, sliding)).toBe(200);
    await setPolicy(organization, { ttlSeconds: 600, slidingTtl: false }, sliding);
    // No longer sliding: its lifetime counts from its creation again.
    expect(await statusOf(member.token, sliding)).toBe(401);
  });

  it("step-up: a member ending another session needs a sign-in within its organization's step-up age, from the next request", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const stepUp = { SESSION_STEP_UP_MAX_AGE_SECONDS: "600" } as Partial<Env>;
    const organization = await newOrganization();
    await setPolicy(organization, { stepUpMaxAgeSeconds: 60 }, stepUp);
    const member = newUser();
    const [mine, other] = [await issueMember(member, organization), await issueMember(member, organization)];
    const outside = newUser();
    const [theirs, theirOther] = [await issueOutside(outside), await issueOutside(outside)];
    vi.setSystemTime(START + 120_000);
    const end = (caller: { token: string }, target: { id: string }) =>
      callWith(stepUp, "DELETE", `/auth/sessions/${target.id}`, bearer(caller.token));
    const refused = await end(mine, other);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ code: "reauthentication_required" });
    // RFC 9470's max_age is the organization's age, not the var's.
    expect(refused.headers.get("WWW-Authenticate")).toBe(
      'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="60"',
    );
    expect(await statusOf(other.token)).toBe(200);
    // The var's 10 minutes for the session outside.
    expect((await end(theirs, theirOther)).status).toBe(200);
    // 0: no step-up for its members.
    await setPolicy(organization, { stepUpMaxAgeSeconds: 0 }, stepUp);
    expect((await end(mine, other)).status).toBe(200);
    expect(await statusOf(other.token)).toBe(401);
  });

  it("where the deployment does not slide, a member's session slides by its organization's policy; one outside keeps its end", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    await setPolicy(organization, { ttlSeconds: 600, slidingTtl: true, maxLifetimeSeconds: 7200 });
    const member = await issueMember(newUser(), organization);
    const outside = await issueOutside(newUser(), { ttlSeconds: 600 });
    // A member's token says so (its secret one character longer): its batch renews, one outside's does not.
    expect([member.token.split(".")[1]?.length, outside.token.split(".")[1]?.length]).toEqual([44, 43]);
    // Its cookie lasts as long as it may slide, its organization's maximum lifetime; one outside's, its 10 minutes.
    expect([member.cookie, outside.cookie].map((cookie) => cookie.match(/Max-Age=(\d+)/)?.[1])).toEqual([
      "7200",
      "600",
    ]);
    vi.setSystemTime(START + 400_000);
    expect([await statusOf(member.token), await statusOf(outside.token)]).toEqual([200, 200]);
    // Renewed at +400 s: until +1000 s; the session outside ended at +600 s.
    vi.setSystemTime(START + 999_999);
    expect([await statusOf(member.token), await statusOf(outside.token)]).toEqual([200, 401]);
    // Renewed again: until +1600 s.
    vi.setSystemTime(START + 1_500_000);
    expect(await statusOf(member.token)).toBe(200);
    // Re-authenticated, its new cookie lasts as its organization's policy lets it slide.
    const service = new SessionService(createExecutionContext(), env);
    const reissued = await service.reauthenticate({ token: member.token, factors: ["pwd"] });
    expect(reissued?.cookie.match(/Max-Age=(\d+)/)?.[1]).toBe("7200");
    await setPolicy(organization, { ttlSeconds: 600, slidingTtl: null });
    // The var's: no sliding, its lifetime counts from its creation again.
    expect(await statusOf(reissued?.token as string)).toBe(401);
  });

  it("where the deployment has no step-up, a member needs a sign-in within its organization's step-up age; one outside none", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    await setPolicy(organization, { stepUpMaxAgeSeconds: 60 });
    const member = newUser();
    const [mine, other] = [await issueMember(member, organization), await issueMember(member, organization)];
    const outside = newUser();
    const [theirs, theirOther] = [await issueOutside(outside), await issueOutside(outside)];
    vi.setSystemTime(START + 120_000);
    const end = (caller: { token: string }, target: { id: string }) =>
      callWith({}, "DELETE", `/auth/sessions/${target.id}`, bearer(caller.token));
    const refused = await end(mine, other);
    expect({ status: refused.status, body: await refused.json() }).toMatchObject({
      status: 401,
      body: { code: "reauthentication_required" },
    });
    // RFC 9470's max_age is the organization's age, not the var's.
    expect(refused.headers.get("WWW-Authenticate")).toBe(
      'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="60"',
    );
    expect(await statusOf(other.token)).toBe(200);
    expect((await end(theirs, theirOther)).status).toBe(200);
    expect(await statusOf(theirOther.token)).toBe(401);
    // Null: the var's, none.
    await setPolicy(organization, { stepUpMaxAgeSeconds: null });
    expect((await end(mine, other)).status).toBe(200);
    expect(await statusOf(other.token)).toBe(401);
  });

  it("a token proves a member's session only with a member's secret, and one outside only with its own", async () => {
    const organization = await newOrganization();
    const user = newUser();
    const [member, outside] = [await issueMember(user, organization), await issueOutside(user)];
    const db = await d1OfUser(user);
    const sha256 = async (text: string) =>
      [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)))]
        .map((byte) => byte.toString(16).padStart(2, "0"))
        .join("");
    // Each row's secret swapped for one of the other length: a member's session issued before its
    // token said so, and its opposite. Neither is proven, so no member escapes its policy's statements.
    const [short, long] = ["s".repeat(43), "l".repeat(44)];
    const store = async (secrets: [{ id: string }, string][]) => {
      for (const [row, secret] of secrets)
        await db
          .prepare("UPDATE sessions SET secret_hash = ? WHERE id = ?")
          .bind(await sha256(secret), row.id)
          .run();
    };
    await store([
      [member, short],
      [outside, long],
    ]);
    expect([await statusOf(`${member.id}.${short}`), await statusOf(`${outside.id}.${long}`)]).toEqual([401, 401]);
    // The same secrets at their own lengths prove them.
    await store([
      [member, long],
      [outside, short],
    ]);
    expect([await statusOf(`${member.id}.${long}`), await statusOf(`${outside.id}.${short}`)]).toEqual([200, 200]);
  });

  it("a member's row a former context end left with a lifetime of 0 stays ended, listed to no one", async () => {
    const organization = await newOrganization();
    const user = newUser();
    const [ended, other] = [await issueMember(user, organization), await issueMember(user, organization)];
    const db = await d1OfUser(user);
    await db.prepare("UPDATE sessions SET ttl_seconds = 0 WHERE id = ?").bind(ended.id).run();
    expect(await statusOf(ended.token)).toBe(401);
    const listed = await callWith({}, "GET", "/auth/sessions", bearer(other.token));
    expect(((await listed.json()) as { sessions: { id: string }[] }).sessions.map(({ id }) => id)).toEqual([other.id]);
  });

  it("a member's session whose organization was removed is not live", async () => {
    const organization = await newOrganization();
    const member = await issueMember(newUser(), organization);
    expect(await statusOf(member.token)).toBe(200);
    await removeOrganization(organization);
    expect(await statusOf(member.token)).toBe(401);
    expect(await exports.SessionService.authenticate(member.token)).toBeNull();
  });

  it("a member's request still costs one round trip, on the user's database, as one outside does", async () => {
    const organization = await newOrganization();
    await setPolicy(organization, { ttlSeconds: 3600, idleTimeoutSeconds: 900 });
    for (const session of [await issueMember(newUser(), organization), await issueOutside(newUser())]) {
      const userId = (await exports.SessionService.authenticate(session.token))!.userId;
      const own = { [await bindingOfUser(userId)]: 1 };
      for (const path of ["/auth/sessions", "/auth/whoami", "/auth/events"]) {
        const counter = countingShards(databases());
        const response = await callWith(counter.env, "GET", path, bearer(session.token));
        expect({ path, status: response.status, roundTrips: counter.roundTrips() }).toEqual({
          path,
          status: 200,
          roundTrips: own,
        });
      }
    }
  });
});

describe("organization policy: the context and travel policies, from the member's next request", () => {
  const HOME: Network = { country: "DE", asn: 3320 };
  const STEP_UP =
    'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';
  // One provider everywhere (Cloudflare WARP's ASN): only travel can change.
  const WARP = 13335;
  const NEW_YORK: Network = { country: "US", asn: WARP, latitude: "40.71280", longitude: "-74.00600" };
  const CHICAGO: Network = { country: "US", asn: WARP, latitude: "41.87810", longitude: "-87.62980" };
  const HONG_KONG: Network = { country: "HK", asn: WARP, latitude: "22.31930", longitude: "114.16940" };

  type Browser = Issued & { userId: string };

  /** A browser's session (carrier cookie, as the login worker issues it), a member's when `organization` is given. */
  async function browser(userId: string, organization?: string, network: Network = HOME): Promise<Browser> {
    const issued = await issue(userId, { country: network.country, asn: network.asn, carrier: "cookie", organization });
    return { ...issued, userId };
  }

  /** GET /auth/sessions through the session's cookie, from `userAgent` and `network`. */
  function list(session: Issued, userAgent = CHROME_MAC, network: Network = HOME, vars: Partial<Env> = {}) {
    const headers = { ...sessionCookie(session.token), "User-Agent": userAgent, "CF-Connecting-IP": "198.51.100.7" };
    return callWith(vars, "GET", "/auth/sessions", headers, undefined, network);
  }

  /** The session's events' types and reasons, and whether it is held (`ended`: no row). */
  async function stateOf(session: Browser) {
    const db = await d1OfUser(session.userId);
    const row = await db.prepare("SELECT context_step_up AS held FROM sessions WHERE id = ?").bind(session.id).first();
    const { results } = await db
      .prepare("SELECT type, reason FROM session_events WHERE session_id = ? ORDER BY id")
      .bind(session.id)
      .all<{ type: string; reason: string | null }>();
    return { held: row ? row.held : "ended", events: results.map(({ type, reason }) => [type, reason]) };
  }

  const created = ["created", null];

  it("device end for a member where the var holds: a policy set after sign-in ends the member's session; one outside is held", async () => {
    const organization = await newOrganization();
    const user = newUser();
    const member = await browser(user, organization);
    const other = await browser(user, organization);
    const outside = await browser(user);
    expect((await list(member)).status).toBe(200);
    await setPolicy(organization, { contextDevice: "end" });
    await expectError(await list(member, FIREFOX_WINDOWS), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    // Ended for good, its row deleted as one outside's would be, and listed to no one.
    await expectError(await list(member), 401, "invalid_token", { wwwAuthenticate: REJECTED_CHALLENGE });
    expect(await stateOf(member)).toEqual({ held: "ended", events: [created, ["ended", "context_changed"]] });
    const listed = (await (await list(other)).json()) as { sessions: { id: string }[] };
    expect(listed.sessions.map(({ id }) => id).sort()).toEqual([other.id, outside.id].sort());
    // The same user's session outside the organization, on the same database: the var's hold.
    await expectError(await list(outside, FIREFOX_WINDOWS), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await stateOf(outside)).toEqual({ held: 1, events: [created, ["context_changed", "hold"]] });
  });

  it("a member's re-authentication from another device only logs the change, whatever its organization's policy says", async () => {
    const organization = await newOrganization();
    await setPolicy(organization, { contextDevice: "end" });
    const member = await browser(newUser(), organization);
    const service = new SessionService(createExecutionContext(), env);
    const reissued = await service.reauthenticate({
      token: member.token,
      factors: ["pwd"],
      carrier: "cookie",
      context: { userAgent: FIREFOX_WINDOWS, country: HOME.country, asn: HOME.asn },
    });
    expect(reissued?.sessionId).toBe(member.id);
    // The user just proved who they are: logged, not ended, and the new token works from there.
    expect(await stateOf(member)).toEqual({
      held: 0,
      events: [created, ["context_changed", "log"], ["reauthenticated", null]],
    });
    expect((await list({ ...member, token: reissued?.token as string }, FIREFOX_WINDOWS)).status).toBe(200);
  });

  it("device ignore for a member where the var holds: recorded silently; back to the var's hold at its next change", async () => {
    const organization = await newOrganization();
    await setPolicy(organization, { contextDevice: "ignore" });
    const member = await browser(newUser(), organization);
    expect((await list(member, FIREFOX_WINDOWS)).status).toBe(200);
    expect(await stateOf(member)).toEqual({ held: 0, events: [created] });
    await setPolicy(organization, { contextDevice: null });
    await expectError(await list(member), 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    expect(await stateOf(member)).toEqual({ held: 1, events: [created, ["context_changed", "hold"]] });
  });

  it("where the var ends (its DELETE in the batch), a member whose organization holds is held, one outside ended", async () => {
    const ending = { SESSION_CONTEXT_DEVICE: "end" } as Partial<Env>;
    const organization = await newOrganization();
    await setPolicy(organization, { contextDevice: "hold", contextNetwork: "end" }, ending);
    const user = newUser();
    const member = await browser(user, organization);
    const outside = await browser(user);
    await expectError(await list(member, FIREFOX_WINDOWS, HOME, ending), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await stateOf(member)).toEqual({ held: 1, events: [created, ["context_changed", "hold"]] });
    await expectError(await list(outside, FIREFOX_WINDOWS, HOME, ending), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    expect(await stateOf(outside)).toEqual({ held: "ended", events: [created, ["ended", "context_changed"]] });
    // The organization's network end, where the var logs: the DELETE ends the member's row.
    const abroad = await browser(user, organization);
    await expectError(await list(abroad, CHROME_MAC, { country: "BR", asn: 28573 }, ending), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    expect(await stateOf(abroad)).toEqual({ held: "ended", events: [created, ["ended", "context_changed"]] });
  });

  it("travel limits per organization: a shorter minimum holds a member's trip the vars allow; a higher top speed allows one they hold", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const near = await newOrganization();
    const fast = await newOrganization();
    await setPolicy(near, { travelMinKm: 500 });
    await setPolicy(fast, { travelMaxKmh: 50_000 });
    const [nearMember, fastMember, outside, outsideFar] = [
      await browser(newUser(), near, NEW_YORK),
      await browser(newUser(), fast, NEW_YORK),
      await browser(newUser(), undefined, NEW_YORK),
      await browser(newUser(), undefined, NEW_YORK),
    ];
    for (const session of [nearMember, fastMember, outside, outsideFar])
      expect((await list(session, CHROME_MAC, NEW_YORK)).status).toBe(200);
    // Twenty minutes later: Chicago is 1,145 km away (3,436 km/h), Hong Kong 12,955 km (38,866 km/h).
    vi.setSystemTime(START + 20 * 60_000);
    await expectError(await list(nearMember, CHROME_MAC, CHICAGO), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect((await list(outside, CHROME_MAC, CHICAGO)).status).toBe(200);
    expect((await list(fastMember, CHROME_MAC, HONG_KONG)).status).toBe(200);
    await expectError(await list(outsideFar, CHROME_MAC, HONG_KONG), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await Promise.all([nearMember, fastMember, outside, outsideFar].map(stateOf))).toEqual([
      { held: 1, events: [created, ["context_changed", "hold"]] },
      { held: 0, events: [created] },
      { held: 0, events: [created] },
      { held: 1, events: [created, ["context_changed", "hold"]] },
    ]);
  });

  it("travel end for a member: the event names the trip, the session ends", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(START);
    const organization = await newOrganization();
    await setPolicy(organization, { contextTravel: "end" });
    const member = await browser(newUser(), organization, NEW_YORK);
    expect((await list(member, CHROME_MAC, NEW_YORK)).status).toBe(200);
    vi.setSystemTime(START + 20 * 60_000);
    await expectError(await list(member, CHROME_MAC, HONG_KONG), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
    const event = await (await d1OfUser(member.userId))
      .prepare(
        "SELECT type, reason, context ->> '$.travel.distance_km' AS km FROM session_events WHERE session_id = ? AND type = 'ended'",
      )
      .bind(member.id)
      .first();
    expect(event).toEqual({ type: "ended", reason: "context_changed", km: 12955 });
  });

  it("where every var ignores, an organization's policy judges its members; a session outside sends no statement that judges", async () => {
    const ignoring = {
      SESSION_CONTEXT_DEVICE: "ignore",
      SESSION_CONTEXT_NETWORK: "ignore",
      SESSION_CONTEXT_TRAVEL: "ignore",
    } as Partial<Env>;
    const organization = await newOrganization();
    const { vars, key } = await adminKey();
    const path = `/admin/organizations/${organization}/policy`;
    const put = await admin({ ...ignoring, ...vars }, key, "PUT", path, { contextDevice: "hold" });
    expect({ status: put.status, body: await put.json() }).toMatchObject({
      status: 200,
      body: {
        policy: { contextDevice: "hold" },
        effective: { contextPolicies: { device: "hold", network: "ignore" } },
      },
    });
    const member = await browser(newUser(), organization);
    const outside = await browser(newUser());
    const statements: number[] = [];
    for (const session of [member, outside]) {
      const counter = countingShards(databases());
      const headers = { ...sessionCookie(session.token), "User-Agent": FIREFOX_WINDOWS };
      const response = await callWith(
        { ...counter.env, ...ignoring },
        "GET",
        "/auth/sessions",
        headers,
        undefined,
        HOME,
      );
      statements.push(response.status, counter.statements());
    }
    // The member's batch holds the statements that log, hold and end; one outside's, its activity and the list.
    expect(statements).toEqual([401, 4, 200, 2]);
    expect(await stateOf(member)).toEqual({ held: 1, events: [created, ["context_changed", "hold"]] });
    expect(await stateOf(outside)).toEqual({ held: 0, events: [created] });
  });

  it("a judged request costs a member one round trip, and one outside the statements its vars call for", async () => {
    const organization = await newOrganization();
    await setPolicy(organization, { contextDevice: "end", travelMinKm: 500 });
    const costs: Record<string, unknown> = {};
    for (const [name, organizationId] of [
      ["outside", undefined],
      ["member", organization],
    ] as const) {
      const session = await browser(newUser(), organizationId, NEW_YORK);
      const own = await bindingOfUser(session.userId);
      const cost = [];
      // Unchanged, then from another browser: the member's ends, the other's is held.
      for (const userAgent of [CHROME_MAC, FIREFOX_WINDOWS]) {
        const counter = countingShards(databases());
        const headers = { ...sessionCookie(session.token), "User-Agent": userAgent };
        const response = await callWith(counter.env, "GET", "/auth/sessions", headers, undefined, NEW_YORK);
        cost.push({
          status: response.status,
          roundTrips: counter.roundTrips()[own],
          statements: counter.statements(),
          rowsWritten: counter.rowsWritten(),
        });
      }
      costs[name] = cost;
    }
    // One round trip each; the member's batch also holds the DELETE that its organization's `end`
    // needs and no var sends, and its activity write the renewal its organization's sliding may
    // need (its expiry's index entry, 2 rows) where the deployment does not slide (rows read: npm
    // run bench:sql, docs/organization-policy.md).
    expect(costs).toEqual({
      member: [
        { status: 200, roundTrips: 1, statements: 4, rowsWritten: 3 },
        { status: 401, roundTrips: 1, statements: 4, rowsWritten: 3 },
      ],
      outside: [
        { status: 200, roundTrips: 1, statements: 3, rowsWritten: 1 },
        { status: 401, roundTrips: 1, statements: 3, rowsWritten: 3 },
      ],
    });
  });
});
