import { compactDecrypt, exportJWK, generateKeyPair } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { d1, newUser } from "./helpers.ts";
import {
  admin,
  adminKeyVars,
  newOrganization,
  organizationOfSession,
  rpc,
  secretsKeys,
  signIn,
} from "./organization-fixtures.ts";

// An organization's identity providers over the admin API: registered, read, changed and removed
// without a deploy, held to SSF_UPSTREAMS' rules, the push's Authorization write-only and sealed.

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

const keys = await generateKeyPair("ES256", { extractable: true });
const JWKS = { keys: [{ ...(await exportJWK(keys.publicKey)), kid: "p1", alg: "ES256" }] };
const VAR_UPSTREAM = {
  issuer: "https://var.example",
  name: "var-idp",
  client_id: "sessions-app",
  jwks: JWKS,
};

const uniqueName = () => `okta-${crypto.randomUUID().slice(0, 8)}`;
const entry = (name: string, more: Record<string, unknown> = {}) => ({
  name,
  issuer: "https://accounts.google.com",
  client_id: "sessions-app",
  jwks: JWKS,
  ...more,
});

async function setUp(organization?: string) {
  const key = await adminKeyVars(["organizations"], organization);
  const secrets = secretsKeys();
  const vars = {
    ADMIN_KEYS: key.ADMIN_KEYS,
    ORGANIZATION_SECRETS_KEYS: secrets,
    SSF_UPSTREAMS: JSON.stringify([VAR_UPSTREAM]),
  } as Partial<Env>;
  return { vars, key: key.key, secrets };
}

const INVALID = (detail: string) => ({
  code: "invalid_input",
  message: "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
  detail,
});
const NOT_FOUND = { code: "not_found", message: "No such endpoint." };

async function storedRows(organization: string) {
  const { results } = await d1("DB")
    .prepare("SELECT name, config, authorization, enabled FROM organization_providers WHERE organization_id = ?")
    .bind(organization)
    .all();
  return results;
}

describe("an organization's identity providers, over the admin API", () => {
  it("registers, lists, reads, changes and removes one; its push Authorization is never answered and stored sealed", async () => {
    const { vars, key, secrets } = await setUp();
    const org = await newOrganization();
    const name = uniqueName();
    const push = { endpoint_url: "https://accounts.google.com/ssf/push" };
    const sent = entry(name, { audience: "https://sessions.example/ssf", subject: "iss_sub", push });
    const created = await admin(vars, key, "POST", `/admin/organizations/${org}/providers`, {
      ...sent,
      authorization: "Bearer s3cret-push-token",
    });
    expect(created.status).toBe(201);
    const view = (await created.json()) as Record<string, unknown>;
    expect(view).toEqual({
      ...sent,
      organizationId: org,
      enabled: true,
      authorization: { set: true },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(JSON.stringify(view)).not.toContain("s3cret");

    // Stored: the entry without the secret, and the secret as a JWE only the key opens, bound to its organization and provider.
    const [row] = (await storedRows(org)) as { config: string; authorization: string; enabled: number }[];
    expect(JSON.parse(row?.config as string)).toEqual(sent);
    expect(row?.authorization).not.toContain("s3cret");
    expect(row?.authorization.split(".")).toHaveLength(5);
    const [jwk] = JSON.parse(secrets) as [{ k: string }];
    const secretKey = Uint8Array.from(atob(jwk.k.replaceAll("-", "+").replaceAll("_", "/")), (c) => c.charCodeAt(0));
    const opened = await compactDecrypt(row?.authorization as string, secretKey);
    expect(new TextDecoder().decode(opened.plaintext)).toBe("Bearer s3cret-push-token");
    expect(opened.protectedHeader).toEqual({ alg: "dir", enc: "A256GCM", kid: "k1", org, sub: name });

    const listed = await admin(vars, key, "GET", `/admin/organizations/${org}/providers`);
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual({ providers: [view] });
    const read = await admin(vars, key, "GET", `/admin/organizations/${org}/providers/${name}`);
    expect(await read.json()).toEqual(view);

    // PATCH: only what it names; the Authorization kept.
    const patched = await admin(vars, key, "PATCH", `/admin/organizations/${org}/providers/${name}`, {
      enabled: false,
      acr_levels: { phr: 3 },
    });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({
      enabled: false,
      acr_levels: { phr: 3 },
      authorization: { set: true },
    });
    // PUT: the whole entry; without push, the Authorization goes too.
    const replaced = await admin(vars, key, "PUT", `/admin/organizations/${org}/providers/${name}`, entry(name));
    expect(replaced.status).toBe(200);
    expect(await replaced.json()).toMatchObject({ ...entry(name), enabled: true, authorization: { set: false } });
    expect(await storedRows(org)).toEqual([
      { name, config: JSON.stringify(entry(name)), authorization: null, enabled: 1 },
    ]);

    const removed = await admin(vars, key, "DELETE", `/admin/organizations/${org}/providers/${name}`);
    expect(removed.status).toBe(200);
    expect(await removed.json()).toEqual({ removed: true });
    expect(await storedRows(org)).toEqual([]);
    const again = await admin(vars, key, "DELETE", `/admin/organizations/${org}/providers/${name}`);
    expect(again.status).toBe(404);
    expect(await again.json()).toEqual(NOT_FOUND);
  });

  it("refuses what SSF_UPSTREAMS refuses, 400 naming the member, and writes nothing", async () => {
    const { vars, key } = await setUp();
    const org = await newOrganization();
    const name = uniqueName();
    const cases: [Record<string, unknown>, string][] = [
      [entry(name, { issuer: "not a url" }), "issuer is a URL"],
      [entry("a b"), "name is 1 to 39 characters of A-Z a-z 0-9 . _ -"],
      [entry(name, { jwks_uri: "https://idp.example/jwks" }), "each entry has exactly one of jwks and jwks_uri"],
      [
        { ...entry(name, { jwks: undefined }), jwks_uri: "http://idp.example/jwks" },
        "jwks_uri is an https URL (http only on a loopback host)",
      ],
      [
        entry(name, { audience: "https://sessions.example/ssf" }),
        "audience and subject come together (an upstream that sends SETs) or not at all",
      ],
      [entry(name, { region: "mars" }), "region, when given, is two lowercase letters"],
      [entry(name, { region: "zz" }), "region, when given, is one of the regions of SHARDS"],
      [
        entry(name, { push: { endpoint_url: "http://idp.example/push" } }),
        "push endpoint_url is an https URL (http only on a loopback host), without credentials or fragment",
      ],
      [
        entry(name, { authorization: "Bearer x" }),
        "authorization comes with push (the Authorization its pushes carry)",
      ],
      [
        entry(name, { push: { endpoint_url: "https://idp.example/push" }, authorization: "line\nbreak" }),
        "authorization is 1 to 1024 printable ASCII characters, or null",
      ],
      [entry(name, { enabled: "yes" }), "enabled, when given, is true or false"],
      [
        entry(name, { secret: 1 }),
        "secret is not a member this call takes (name, issuer, client_id, jwks, jwks_uri, audience, subject, subjects_are_user_ids, events, region, acr_levels, push, enabled, authorization)",
      ],
    ];
    for (const [body, detail] of cases) {
      const response = await admin(vars, key, "POST", `/admin/organizations/${org}/providers`, body);
      expect([response.status, await response.json()]).toEqual([400, INVALID(detail)]);
    }
    // A patch is judged merged with what is stored.
    expect((await admin(vars, key, "POST", `/admin/organizations/${org}/providers`, entry(name))).status).toBe(201);
    const patch = await admin(vars, key, "PATCH", `/admin/organizations/${org}/providers/${name}`, {
      client_id: null,
    });
    expect([patch.status, await patch.json()]).toEqual([
      400,
      INVALID("each entry has audience and subject (SETs), client_id (OpenID Connect), or both"),
    ]);
    const renamed = await admin(vars, key, "PUT", `/admin/organizations/${org}/providers/${name}`, entry("other"));
    expect(renamed.status).toBe(400);
    expect(await storedRows(org)).toEqual([
      { name, config: JSON.stringify(entry(name)), authorization: null, enabled: 1 },
    ]);
  });

  it("a name is the deployment's: one of SSF_UPSTREAMS or of another organization's provider is 409", async () => {
    const { vars, key } = await setUp();
    const [a, b] = [await newOrganization("A"), await newOrganization("B")];
    const name = uniqueName();
    expect((await admin(vars, key, "POST", `/admin/organizations/${a}/providers`, entry(name))).status).toBe(201);
    for (const [org, taken] of [
      [b, name],
      [a, name],
      [b, "var-idp"],
    ] as const) {
      const response = await admin(vars, key, "POST", `/admin/organizations/${org}/providers`, entry(taken));
      expect([response.status, await response.json()]).toEqual([
        409,
        {
          code: "provider_name_taken",
          message:
            "An identity provider of this name exists already (an organization's, or one of SSF_UPSTREAMS): choose another name.",
        },
      ]);
    }
    expect(await storedRows(b)).toEqual([]);
  });

  it("an organization that does not exist, or one the key is not for, is 404 on every route, nothing written", async () => {
    const mine = await newOrganization("Mine");
    const theirs = await newOrganization("Theirs");
    const { vars, key } = await setUp(mine);
    const name = uniqueName();
    const missing = "org_AAAAAAAAAAAAAAAAAAAAAA";
    for (const org of [theirs, missing]) {
      for (const [method, path, body] of [
        ["POST", `/admin/organizations/${org}/providers`, entry(name)],
        ["GET", `/admin/organizations/${org}/providers`, undefined],
        ["GET", `/admin/organizations/${org}/providers/${name}`, undefined],
        ["PATCH", `/admin/organizations/${org}/providers/${name}`, { enabled: false }],
        ["PUT", `/admin/organizations/${org}/providers/${name}`, entry(name)],
        ["DELETE", `/admin/organizations/${org}/providers/${name}`, undefined],
      ] as const) {
        const response = await admin(vars, key, method, path, body);
        expect([method, path, response.status, await response.json()]).toEqual([method, path, 404, NOT_FOUND]);
      }
    }
    expect(await storedRows(theirs)).toEqual([]);
    // Its own organization it reaches.
    expect((await admin(vars, key, "POST", `/admin/organizations/${mine}/providers`, entry(name))).status).toBe(201);
  });

  it("a new push endpoint takes the Authorization given again, or null: the stored one is never sent where it was not given for", async () => {
    const organization = await newOrganization();
    const { vars, key } = await setUp();
    const name = uniqueName();
    const path = `/admin/organizations/${organization}/providers/${name}`;
    const push = (host: string) => ({ endpoint_url: `https://${host}.example/ssf/push` });
    const registered = await admin(vars, key, "POST", `/admin/organizations/${organization}/providers`, {
      ...entry(name),
      push: push("okta"),
      authorization: "Bearer okta-only",
    });
    expect(registered.status).toBe(201);
    const before = await storedRows(organization);
    const moved = await admin(vars, key, "PATCH", path, { push: push("elsewhere") });
    expect({ status: moved.status, body: await moved.json() }).toEqual({
      status: 400,
      body: INVALID(
        "authorization must be sent again, or null, with a new push.endpoint_url: the stored one is sent only where it was given for",
      ),
    });
    expect(await storedRows(organization)).toEqual(before);
    // The same endpoint keeps it; a new one with its Authorization given again, or none, is taken.
    expect((await admin(vars, key, "PATCH", path, { push: push("okta") })).status).toBe(200);
    const given = await admin(vars, key, "PATCH", path, { push: push("elsewhere"), authorization: "Bearer new" });
    expect(given.status).toBe(200);
    const dropped = await admin(vars, key, "PATCH", path, { push: push("third"), authorization: null });
    expect({
      status: dropped.status,
      set: ((await dropped.json()) as { authorization: unknown }).authorization,
    }).toEqual({
      status: 200,
      set: { set: false },
    });
  });

  it("an Authorization without ORGANIZATION_SECRETS_KEYS is refused, 400 naming the secret: nothing is stored in clear", async () => {
    const { vars, key } = await setUp();
    const org = await newOrganization();
    const response = await admin(
      { ...vars, ORGANIZATION_SECRETS_KEYS: "" },
      key,
      "POST",
      `/admin/organizations/${org}/providers`,
      entry(uniqueName(), { push: { endpoint_url: "https://idp.example/push" }, authorization: "Bearer x" }),
    );
    expect([response.status, await response.json()]).toEqual([
      400,
      INVALID(
        "authorization needs the Worker secret ORGANIZATION_SECRETS_KEYS (npm run organization:keys), which is unset: nothing is stored in clear",
      ),
    ]);
    expect(await storedRows(org)).toEqual([]);
  });
});

describe("create through an organization's provider", () => {
  it("puts the session in the provider's organization; a disabled or removed provider is refused as an unknown one", async () => {
    const { vars, key } = await setUp();
    const org = await newOrganization();
    const name = uniqueName();
    expect((await admin(vars, key, "POST", `/admin/organizations/${org}/providers`, entry(name))).status).toBe(201);
    const session = await signIn(vars, newUser(), name, "alice");
    expect(await organizationOfSession(session.id)).toBe(org);
    // Through the var's upstream, or none: outside any organization.
    const local = await rpc(vars, (service) => service.create({ userId: newUser() }));
    expect(await organizationOfSession(local.id)).toBeNull();
    const viaVar = await signIn(vars, newUser(), "var-idp", "bob");
    expect(await organizationOfSession(viaVar.id)).toBeNull();

    const unknown =
      "upstream.provider must be the name of an upstream this deployment lists in SSF_UPSTREAMS, or of an enabled provider of an organization";
    expect(
      (await admin(vars, key, "PATCH", `/admin/organizations/${org}/providers/${name}`, { enabled: false })).status,
    ).toBe(200);
    await expect(signIn(vars, newUser(), name, "alice")).rejects.toThrow(new TypeError(unknown));
    expect((await admin(vars, key, "DELETE", `/admin/organizations/${org}/providers/${name}`)).status).toBe(200);
    await expect(signIn(vars, newUser(), name, "alice")).rejects.toThrow(new TypeError(unknown));
    // Over the admin API too: the 400 of the rule, not a failure.
    const { ADMIN_KEYS, key: creator } = await adminKeyVars(["sessions:create"]);
    const response = await admin({ ...vars, ADMIN_KEYS } as Partial<Env>, creator, "POST", "/admin/sessions", {
      userId: newUser(),
      upstream: { provider: name, subject: "alice" },
    });
    expect([response.status, await response.json()]).toEqual([400, INVALID(unknown)]);
  });
});
