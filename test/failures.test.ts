import { afterEach, describe, expect, it, vi } from "vitest";
import { failingD1 } from "./d1.ts";
import { bearer, callWith, expectError, issue, newUser, sessionCookie, wrapShards } from "./helpers.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("database failure", () => {
  it("every operation answers 500 internal_error with nothing of the failure, and keeps the cookie", async () => {
    const session = await issue(newUser());
    const secretish = `SELECT * FROM sessions WHERE secret_hash = 'deadbeef' -- ${session.token}`;
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    const requests: [string, string, Record<string, string>][] = [
      ["GET", "/auth/sessions", bearer(session.token)],
      ["DELETE", `/auth/sessions/${session.id}`, bearer(session.token)],
      ["DELETE", "/auth/sessions/", bearer(session.token)],
      ["POST", "/auth/logout", sessionCookie(session.token)],
      ["DELETE", "/auth/logout", sessionCookie(session.token)],
    ];
    for (const [method, path, headers] of requests) {
      const response = await callWith(
        wrapShards((d1) => failingD1(d1, secretish)),
        method,
        path,
        headers,
      );
      await expectError(response, 500, "internal_error");
    }
    expect(logged.length).toBeGreaterThan(0);
    for (const line of logged) {
      expect(line).not.toContain("secret_hash");
      expect(line).not.toContain(session.token.split(".")[1]);
      expect(line).not.toContain("SELECT");
    }
  });
});
