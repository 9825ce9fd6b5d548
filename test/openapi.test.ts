import { describe, expect, it } from "vitest";
import { MESSAGES } from "../src/http/error-codes.ts";
import { openApiDocument } from "../src/http/routes.ts";
import { bearer, CHALLENGE, call, expectSecurityHeaders, issue, newUser, ORIGIN } from "./helpers.ts";
import { validateResponse } from "./openapi.ts";

const PATHS = [
  "/auth/sessions",
  "/auth/sessions/{id}",
  "/auth/logout",
  "/auth/events",
  "/auth/whoami",
  "/auth/token",
  "/.well-known/jwks.json",
  "/auth/dbsc/registration",
  "/auth/dbsc/refresh",
  "/auth/report",
  "/.well-known/ssf-configuration",
  "/ssf/jwks.json",
  "/ssf/streams",
  "/ssf/streams/status",
  "/ssf/streams/subjects/add",
  "/ssf/streams/subjects/remove",
  "/ssf/streams/verify",
  "/ssf/streams/poll/{streamId}",
  "/ssf/inbound",
  "/ssf/inbound/{name}",
  "/upstreams/{name}/backchannel-logout",
  "/upstreams/{name}/global-token-revocation",
  "/admin/sessions",
  "/admin/sessions/reauthenticate",
  "/admin/users/{userId}/sessions",
  "/admin/users/{userId}/sessions/end",
  "/admin/sessions/{sessionId}/end",
  "/admin/support-sessions",
  "/admin/sessions/{sessionId}/data",
  "/admin/agents/{agentId}/support-sessions/end",
  "/admin/organizations/{id}/sessions",
  "/admin/organizations/{id}/sessions/end",
  "/admin/organizations/{id}/sessions/hold",
  "/admin/organizations",
  "/admin/organizations/{id}",
  "/admin/organizations/{id}/providers",
  "/admin/organizations/{id}/providers/{provider}",
  "/admin/organizations/{id}/policy",
  "/openapi.json",
];

describe("GET /openapi.json", () => {
  it("serves the OpenAPI 3.1 document, public and cacheable for five minutes, with the security headers", async () => {
    const response = await call("GET", "/openapi.json");
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("application/json");
    // Not no-store like /auth/: caches may keep it.
    expect(response.headers.get("Cache-Control")).toBe("public, max-age=300");
    expectSecurityHeaders(response);
    const body = (await response.json()) as typeof openApiDocument;
    expect(body.openapi).toBe("3.1.0");
    expect(Object.keys(body.paths)).toEqual(PATHS);
    expect(body).toEqual(JSON.parse(JSON.stringify(openApiDocument)));
    expect(body.components.securitySchemes).toEqual({
      adminKey: expect.objectContaining({ type: "http", scheme: "bearer" }),
      receiver: expect.objectContaining({ type: "http", scheme: "bearer" }),
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
      reportToken: expect.objectContaining({ type: "http", scheme: "bearer" }),
      sessionCookie: expect.objectContaining({ type: "apiKey", in: "cookie", name: "__Host-session" }),
    });
  });

  it("answers HEAD without a body, and other methods 405 method_not_allowed with Allow", async () => {
    const head = await call("HEAD", "/openapi.json");
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const refused = await call(method, "/openapi.json");
      expect(refused.status).toBe(405);
      expect(refused.headers.get("Allow")).toBe("GET, HEAD");
      expect(await refused.json()).toEqual({ code: "method_not_allowed", message: MESSAGES.method_not_allowed });
      expectSecurityHeaders(refused);
    }
  });
});

describe("the response validator", () => {
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), {
      status,
      headers: { "Content-Type": "application/json", "Cache-Control": "no-store", ...headers },
    });
  const url = (path: string) => `${ORIGIN}${path}`;

  it("accepts a real list, and rejects it once a documented field is missing or an extra one added", async () => {
    const session = await issue(newUser());
    const real = await call("GET", "/auth/sessions", bearer(session.token));
    const body = (await real.json()) as { sessions: Record<string, unknown>[]; currentSessionId: string };
    await validateResponse("GET", url("/auth/sessions"), json(200, body));

    const { last_active_at: _, ...missing } = body.sessions[0]!;
    await expect(
      validateResponse("GET", url("/auth/sessions"), json(200, { ...body, sessions: [missing] })),
    ).rejects.toThrow(/GET \/auth\/sessions → 200[\s\S]*last_active_at/);
    const extra = { ...body.sessions[0], token: "leaked" };
    await expect(
      validateResponse("GET", url("/auth/sessions"), json(200, { ...body, sessions: [extra] })),
    ).rejects.toThrow(/token/);
    const notADate = { ...body.sessions[0], created_at: "yesterday" };
    await expect(
      validateResponse("GET", url("/auth/sessions"), json(200, { ...body, sessions: [notADate] })),
    ).rejects.toThrow(/created_at/);
  });

  it("rejects an undocumented status, code, message, missing header or stray contract header", async () => {
    const error = (code: string) => ({ code, message: "…" });
    await expect(validateResponse("GET", url("/auth/sessions"), json(418, error("invalid_token")))).rejects.toThrow(
      /GET \/auth\/sessions → 418[\s\S]*status 418 is not documented/,
    );
    // A code that exists, but not for this status of this operation.
    await expect(
      validateResponse(
        "GET",
        url("/auth/sessions"),
        json(401, error("token_required"), { "WWW-Authenticate": CHALLENGE }),
      ),
    ).rejects.toThrow(/code/);
    await expect(validateResponse("GET", url("/auth/sessions"), json(401, error("invalid_token")))).rejects.toThrow(
      /WWW-Authenticate is required/,
    );
    await expect(
      validateResponse(
        "DELETE",
        url("/auth/sessions/x"),
        json(200, { message: "Session deleted" }, { "Set-Cookie": "__Host-session=abc; Path=/" }),
      ),
    ).rejects.toThrow(/Set-Cookie/);
    await expect(
      validateResponse(
        "GET",
        url("/auth/events?x=1"),
        json(429, error("rate_limited"), { "Retry-After": "60", "WWW-Authenticate": CHALLENGE }),
      ),
    ).rejects.toThrow(/GET \/auth\/events\?x=1 → 429[\s\S]*WWW-Authenticate is not documented/);
    await expect(
      validateResponse("PUT", url("/auth/logout"), json(405, error("method_not_allowed"), { Allow: "GET, HEAD" })),
    ).rejects.toThrow(/Allow lists/);
    await expect(
      validateResponse("GET", url("/nowhere"), json(404, { code: "not_found", message: MESSAGES.not_found, extra: 1 })),
    ).rejects.toThrow(/extra/);
    // Each code has exactly one message, and the document says which.
    await expect(
      validateResponse("GET", url("/nowhere"), json(404, { code: "not_found", message: "Not here." })),
    ).rejects.toThrow(/body\/message/);
  });

  it("accepts what the document allows outside the operations: 404, 405, 414 and preflights", async () => {
    await validateResponse("GET", url("/nowhere"), json(404, { code: "not_found", message: MESSAGES.not_found }));
    await validateResponse(
      "PUT",
      url("/auth/logout"),
      json(405, { code: "method_not_allowed", message: MESSAGES.method_not_allowed }, { Allow: "POST, DELETE" }),
    );
    await validateResponse(
      "HEAD",
      url("/auth/logout"),
      new Response(null, {
        status: 405,
        headers: { "Content-Type": "application/json", "Cache-Control": "no-store", Allow: "DELETE, POST" },
      }),
    );
    await validateResponse("GET", url("/x"), json(414, { code: "uri_too_long", message: MESSAGES.uri_too_long }));
    await validateResponse(
      "OPTIONS",
      url("/anything"),
      new Response(null, {
        status: 204,
        headers: { "Access-Control-Allow-Origin": "https://app.example", "Access-Control-Allow-Methods": "GET" },
      }),
    );
  });
});
