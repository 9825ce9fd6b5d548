import { exports } from "cloudflare:workers";
import { hc } from "hono/client";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { DeviceType } from "../src/domain/device.ts";
import type { SessionView } from "../src/domain/session-view.ts";
import { MESSAGES } from "../src/http/error-codes.ts";
import type { AppType } from "../src/index.ts";
import { bearer, CHROME_MAC, isLive, issue, newUser, ORIGIN, randomIp } from "./helpers.ts";
import { validateResponse } from "./openapi.ts";

// Hono's typed client against the worker in the Workers runtime (real D1); every response
// it receives is also validated against the OpenAPI document.
const client = hc<AppType>(ORIGIN, {
  fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    request.headers.set("CF-Connecting-IP", randomIp());
    // A browser always sends one: the one the sessions of `issue` were created with.
    if (!request.headers.has("User-Agent")) request.headers.set("User-Agent", CHROME_MAC);
    const response = await exports.default.fetch(request);
    await validateResponse(request.method, request.url, response);
    return response;
  },
});

const IPHONE =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

describe("typed client (hono/client)", () => {
  it("lists sessions with a Bearer token, typed as the route returns them", async () => {
    const userId = newUser();
    const phone = await issue(userId, { userAgent: IPHONE });
    const laptop = await issue(userId);
    const res = await client.auth.sessions.$get(undefined, { headers: bearer(laptop.token) });
    expect(res.status).toBe(200);
    const body = await res.json();
    expectTypeOf(body).toEqualTypeOf<{ sessions: SessionView[]; currentSessionId: string }>();
    const [first] = body.sessions;
    expectTypeOf(first).toEqualTypeOf<SessionView | undefined>();
    expectTypeOf(body.sessions[0]!.device.type).toEqualTypeOf<DeviceType>();
    expect(body.currentSessionId).toBe(laptop.id);
    expect(body.sessions.map((s) => [s.id, s.device.type])).toEqual([
      [laptop.id, "desktop"],
      [phone.id, "mobile"],
    ]);
  });

  it("deletes a session by id through the typed endpoint", async () => {
    const userId = newUser();
    const phone = await issue(userId);
    const laptop = await issue(userId);
    const endpoint = client.auth.sessions[":id{[^\\x2F]*}"];
    expect(endpoint.$url({ param: { id: phone.id } }).pathname).toBe(`/auth/sessions/${phone.id}`);
    const res = await endpoint.$delete({ param: { id: phone.id } }, { headers: bearer(laptop.token) });
    expect(res.status).toBe(200);
    const body = await res.json();
    expectTypeOf(body).toEqualTypeOf<{ message: string }>();
    expect(body).toEqual({ message: "Session deleted" });
    expect(await isLive(phone.token)).toBe(false);
    expect(await isLive(laptop.token)).toBe(true);
  });

  it("sees a refused token as the contract's 401", async () => {
    const res = await client.auth.sessions.$get(undefined, { headers: bearer("not-a-token") });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ code: "invalid_token", message: MESSAGES.invalid_token });
  });
});
