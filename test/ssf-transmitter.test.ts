import { afterEach, describe, expect, it, vi } from "vitest";
import { callWith, expectError, expectSecurityHeaders } from "./helpers.ts";
import { ISSUER, privateJwk, transmitterVars } from "./ssf.ts";

// The Shared Signals transmitter's discovery: its metadata and key set, from SSF_ISSUER and
// the secret SSF_SIGNING_KEYS (a JSON array of private JWKs, newest first).

function publicOf(jwk: JsonWebKey & { kid: string }, alg: string) {
  return jwk.kty === "EC"
    ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y, kid: jwk.kid, alg, use: "sig" }
    : { e: jwk.e, kty: jwk.kty, n: jwk.n, kid: jwk.kid, alg, use: "sig" };
}

const vars = transmitterVars;

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("without SSF_ISSUER the transmitter is off", () => {
  it("both documents answer 404 not_found, as any unknown path", async () => {
    for (const path of ["/.well-known/ssf-configuration", "/ssf/jwks.json"]) {
      await expectError(await callWith({ SSF_ISSUER: "" }, "GET", path), 404, "not_found", { cacheControl: null });
    }
  });
});

describe("GET /.well-known/ssf-configuration", () => {
  it("names the issuer and the key set, public and cacheable for five minutes", async () => {
    const key = await privateJwk("ES256", "k1");
    const response = await callWith(vars([key]), "GET", "/.well-known/ssf-configuration");
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("application/json");
    expect(response.headers.get("Cache-Control")).toBe("public, max-age=300");
    expectSecurityHeaders(response);
    expect(await response.json()).toEqual({
      spec_version: "1_0",
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/ssf/jwks.json`,
      delivery_methods_supported: ["urn:ietf:rfc:8935", "urn:ietf:rfc:8936"],
      configuration_endpoint: `${ISSUER}/ssf/streams`,
      status_endpoint: `${ISSUER}/ssf/streams/status`,
      add_subject_endpoint: `${ISSUER}/ssf/streams/subjects/add`,
      remove_subject_endpoint: `${ISSUER}/ssf/streams/subjects/remove`,
      verification_endpoint: `${ISSUER}/ssf/streams/verify`,
      authorization_schemes: [{ spec_urn: "urn:ietf:rfc:6750" }],
    });
  });

  it("takes http on a loopback host, for npm start, and an origin written with a trailing slash", async () => {
    const key = await privateJwk("ES256", "k1");
    for (const [issuer, origin] of [
      ["http://localhost:8787", "http://localhost:8787"],
      ["http://127.0.0.1:8787/", "http://127.0.0.1:8787"],
      ["https://sessions.example/", "https://sessions.example"],
    ]) {
      const response = await callWith(vars([key], issuer), "GET", "/.well-known/ssf-configuration");
      expect(await response.json()).toMatchObject({ issuer: origin, jwks_uri: `${origin}/ssf/jwks.json` });
    }
  });

  it("answers HEAD without a body, and other methods 405 with Allow", async () => {
    const key = await privateJwk("ES256", "k1");
    const head = await callWith(vars([key]), "HEAD", "/.well-known/ssf-configuration");
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    for (const path of ["/.well-known/ssf-configuration", "/ssf/jwks.json"]) {
      await expectError(await callWith(vars([key]), "POST", path), 405, "method_not_allowed", {
        allow: "GET, HEAD",
        cacheControl: null,
      });
    }
  });
});

describe("GET /ssf/jwks.json", () => {
  it("publishes the public half of the signing key, with its kid, alg and use, and nothing private", async () => {
    const key = await privateJwk("ES256", "current");
    const response = await callWith(vars([key]), "GET", "/ssf/jwks.json");
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("application/jwk-set+json");
    expect(response.headers.get("Cache-Control")).toBe("public, max-age=300");
    const text = await response.text();
    expect(JSON.parse(text)).toEqual({ keys: [publicOf(key, "ES256")] });
    expect(text).not.toContain(key.d as string);
  });

  it("keeps a rotated-out key published until the end of its overlap, then drops it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-25T12:00:00.000Z"));
    const now = Date.now() / 1000;
    const current = await privateJwk("RS256", "2026-11-25");
    const previous = await privateJwk("ES256", "2026-10-01", { exp: now + 1 });
    const retired = await privateJwk("ES256", "2026-09-01", { exp: now });
    const keySet = vars([current, previous, retired]);

    const during = await (await callWith(keySet, "GET", "/ssf/jwks.json")).json();
    expect(during).toEqual({ keys: [publicOf(current, "RS256"), publicOf(previous, "ES256")] });

    vi.setSystemTime(new Date("2026-11-25T12:00:01.000Z"));
    const after = await (await callWith(keySet, "GET", "/ssf/jwks.json")).json();
    expect(after).toEqual({ keys: [publicOf(current, "RS256")] });
  });
});

describe("a refused transmitter configuration", () => {
  it("answers 500 internal_error with one config_error line naming the var and its rule, never a key", async () => {
    const good = await privateJwk("ES256", "k1");
    const { d: _, ...publicOnly } = good;
    const rsa1024 = {
      ...((await crypto.subtle.exportKey(
        "jwk",
        (
          (await crypto.subtle.generateKey(
            {
              name: "RSASSA-PKCS1-v1_5",
              modulusLength: 1024,
              publicExponent: new Uint8Array([1, 0, 1]),
              hash: "SHA-256",
            },
            true,
            ["sign"],
          )) as CryptoKeyPair
        ).privateKey,
      )) as JsonWebKey),
      kid: "weak",
    };
    const KEYS_RULE =
      "SSF_SIGNING_KEYS must be a JSON array of private ES256 (P-256) or RS256 (2048-4096 bit) JWKs, newest first, each with a unique kid; only the first without exp";
    const cases: [Partial<Env>, string][] = [
      [vars([good], "http://sessions.example"), "SSF_ISSUER must be an https origin (http only on a loopback host)"],
      [vars([good], "sessions.example"), "SSF_ISSUER must be an https origin (http only on a loopback host)"],
      [
        vars([good], "https://sessions.example/ssf"),
        "SSF_ISSUER must be an origin: no path, query, fragment or credentials",
      ],
      [{ SSF_ISSUER: ISSUER } as Partial<Env>, "SSF_SIGNING_KEYS must be set when SSF_ISSUER is"],
      [vars("{"), KEYS_RULE],
      [vars([]), KEYS_RULE],
      [vars([publicOnly]), KEYS_RULE],
      [vars([{ ...good, kid: undefined }]), KEYS_RULE],
      [vars([{ ...good, exp: 2_000_000_000 }]), KEYS_RULE],
      [vars([good, { ...good, kid: "k2" }]), KEYS_RULE],
      [vars([good, { ...good, exp: 2_000_000_000 }]), KEYS_RULE],
      [vars([rsa1024]), KEYS_RULE],
    ];
    for (const [bindings, message] of cases) {
      const logged: string[] = [];
      vi.spyOn(console, "error").mockImplementation((line: unknown) => void logged.push(String(line)));
      vi.spyOn(console, "log").mockImplementation(() => {});
      for (const path of ["/.well-known/ssf-configuration", "/ssf/jwks.json"]) {
        await expectError(await callWith(bindings, "GET", path), 500, "internal_error", { cacheControl: null });
      }
      const site = (route: string) => ({ method: "GET", route, request_id: expect.any(String) });
      expect(logged.map((line) => JSON.parse(line))).toEqual([
        { level: "error", event: "config_error", message, ...site("/.well-known/ssf-configuration") },
        { level: "error", event: "config_error", message, ...site("/ssf/jwks.json") },
      ]);
      expect(logged.join("")).not.toContain(good.d as string);
      vi.restoreAllMocks();
    }
  });
});
