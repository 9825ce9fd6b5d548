import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards, faultyD1 } from "./d1.ts";
import { bearer, bindingOfUser, CHROME_MAC, callWith, d1, databases, newUser } from "./helpers.ts";
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

/** A member's session, issued over RPC as the login flow would. */
/** A member's session, issued in this isolate: a refusal over the RPC's loopback is also reported as uncaught there. */
function issueMember(userId: string, organizationId: string, options: { ttlSeconds?: number } = {}) {
  const service = new SessionService(createExecutionContext(), env);
  return service.create({ userId, organization: organizationId, userAgent: CHROME_MAC, ...options });
}

function issueOutside(userId: string) {
  return exports.SessionService.create({ userId, userAgent: CHROME_MAC });
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
      // The deployment does not slide: the renewal write is not there to turn on.
      [{ slidingTtl: true }, "slidingTtl may be true only where SESSION_SLIDING_TTL is true"],
      // Nor has it step-up: the condition is not there to turn on.
      [
        { stepUpMaxAgeSeconds: 300 },
        "stepUpMaxAgeSeconds may be above 0 only where SESSION_STEP_UP_MAX_AGE_SECONDS is",
      ],
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
    for (const missing of [`org_${"x".repeat(22)}`, "not-an-id"]) {
      for (const [method, body] of [
        ["GET", undefined],
        ["PUT", { ttlSeconds: 60 }],
      ] as const) {
        const response = await admin(vars, key, method, `/admin/organizations/${missing}/policy`, body);
        expect({ method, status: response.status, body: await response.json() }).toEqual({
          method,
          status: 404,
          body: NOT_FOUND,
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
    expect(await statusOf(other.token)).toBe(200);
    // The var's 10 minutes for the session outside.
    expect((await end(theirs, theirOther)).status).toBe(200);
    // 0: no step-up for its members.
    await setPolicy(organization, { stepUpMaxAgeSeconds: 0 }, stepUp);
    expect((await end(mine, other)).status).toBe(200);
    expect(await statusOf(other.token)).toBe(401);
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
