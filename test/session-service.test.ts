import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openShards } from "../src/db/shards.ts";
import { readConfig } from "../src/domain/config.ts";
import { SessionService } from "../src/rpc/session-service.ts";
import { issueSession } from "../src/services/issue-session.ts";
import { newUser, scopeWith, tableSnapshot } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
});

describe("SessionService (Workers RPC)", () => {
  it("create returns id, token, expiry and a ready Set-Cookie; authenticate resolves the token", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(new Date("2026-11-22T00:00:00.000Z"));
    const userId = newUser();
    const created = await exports.SessionService.create({ userId, ipAddress: "203.0.113.9", userAgent: "curl/8.5.0" });
    expect(created.token).toMatch(/^[A-Za-z0-9_-]{24}\.[A-Za-z0-9_-]{43}$/);
    expect(created.token.startsWith(`${created.id}.`)).toBe(true);
    expect(created.expiresAt).toBe("2026-12-22T00:00:00.000Z");
    expect(created.cookie).toBe(
      `__Host-session=${created.token}; Max-Age=2592000; Path=/; HttpOnly; Secure; SameSite=Lax`,
    );
    expect(await exports.SessionService.authenticate(created.token)).toEqual({
      sessionId: created.id,
      userId,
      expiresAt: "2026-12-22T00:00:00.000Z",
      authenticatedAt: "2026-11-22T00:00:00.000Z",
      factors: [],
      assuranceLevel: null,
      organization: null,
    });
  });

  it("honours ttlSeconds and stores no token, only a SHA-256 of its secret", async () => {
    const userId = newUser();
    const created = await exports.SessionService.create({ userId, ttlSeconds: 90 });
    expect(new Date(created.expiresAt).getTime() - Date.now()).toBeLessThanOrEqual(90_000);
    const rows = JSON.stringify(await tableSnapshot());
    const secret = created.token.split(".")[1]!;
    expect(rows).not.toContain(secret);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret)));
    expect(rows).toContain(Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join(""));
  });

  it("records location from request.cf and parsed device facts, cleaning what the login worker passes", async () => {
    const userId = newUser();
    const cases: [Record<string, unknown>, string | null][] = [
      [{ country: "DE", city: "Berlin" }, "Berlin, DE"],
      [{ country: "US" }, "US"],
      [{ city: "  São Paulo  " }, "São Paulo"],
      [{ country: "Germany", city: "Ber\u0000lin\n" }, "Berlin"],
      [{ country: "de", city: "" }, null],
      [{ country: 42, city: { name: "x" } }, null],
      [{ city: "x".repeat(300) }, "x".repeat(100)],
    ];
    const created: { id: string; token: string }[] = [];
    for (const [location] of cases)
      created.push(await exports.SessionService.create({ userId, userAgent: "curl/8.5.0", ...location } as never));
    const response = await exports.default.fetch("https://sessions.example/auth/sessions", {
      headers: { Authorization: `Bearer ${created[0]!.token}`, "User-Agent": "curl/8.5.0" },
    });
    const { sessions } = (await response.json()) as {
      sessions: { id: string; location: string | null; device: unknown }[];
    };
    for (const [index, [, expected]] of cases.entries()) {
      const listed = sessions.find((s) => s.id === created[index]!.id)!;
      expect(listed.location).toBe(expected);
      expect(listed.device).toEqual({ browser: "curl 8", os: null, type: "bot" });
    }
  });

  it("issues distinct tokens", async () => {
    const userId = newUser();
    const tokens = await Promise.all(Array.from({ length: 20 }, () => exports.SessionService.create({ userId })));
    expect(new Set(tokens.map((t) => t.token)).size).toBe(20);
  });

  it("authenticate returns null for anything that is not a live token", async () => {
    for (const token of ["", "x", `${"A".repeat(22)}.${"B".repeat(43)}`, "A".repeat(10_000)]) {
      expect(await exports.SessionService.authenticate(token)).toBeNull();
    }
  });

  // Called directly rather than over RPC: the runtime reports an RPC method's rejection as
  // an uncaught error in the callee, which the test pool would count as a failure.
  it("create's code path rejects bad input and writes nothing", async () => {
    const before = await tableSnapshot();
    const bad = [
      { userId: "" },
      { userId: "   " },
      { userId: "u".repeat(256) },
      { userId: newUser(), ttlSeconds: 0 },
      { userId: newUser(), ttlSeconds: -5 },
      { userId: newUser(), ttlSeconds: 1.5 },
      { userId: newUser(), ttlSeconds: 400 * 86400 + 1 },
    ];
    const shards = openShards(env);
    for (const input of bad) await expect(issueSession(scopeWith(shards, readConfig(env)), input)).rejects.toThrow();
    expect(await tableSnapshot()).toEqual(before);
  });

  it("takes userId exactly as given: surrounding whitespace or a control character is refused, not trimmed", async () => {
    const before = await tableSnapshot();
    const userId = newUser();
    // Called in-process: a rejection through the RPC stub is reported by the pool as uncaught.
    const service = new SessionService(createExecutionContext(), env);
    for (const bad of [
      ` ${userId}`,
      `${userId} `,
      `${userId}\n`,
      `\t${userId}`,
      `${userId}\u00a0`,
      `us\u0000er`,
      `us\u007fer`,
      // Dot segments: a URL path cannot carry them (the admin API's /admin/users/{userId}/…).
      ".",
      "..",
    ]) {
      await expect(service.create({ userId: bad })).rejects.toThrow(
        'userId must be a non-empty string of at most 255 characters, without leading or trailing whitespace or control characters, and not "." or ".."',
      );
    }
    expect(await tableSnapshot()).toEqual(before);
    // Inner spaces and any other character are the caller's business: stored as given.
    for (const good of ["Alice Smith", "ünïcødé-用户", "a", "...", ".alice"]) {
      const created = await exports.SessionService.create({ userId: good });
      expect((await exports.SessionService.authenticate(created.token))?.userId).toBe(good);
    }
  });
});
