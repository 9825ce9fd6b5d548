import { exports } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { describe, expect, it } from "vitest";
import { sessionNameOf } from "../src/db/session-view.ts";
import { type NamedSession, sessionName } from "../src/domain/session-view.ts";
import { parseDevice } from "../src/domain/user-agent.ts";
import { databases, issue, newUser } from "./helpers.ts";

describe("session name labels, as the list shows them", () => {
  const cases: [string, string | null, string][] = [
    [
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
      "203.0.113.7",
      "Chrome 131 on macOS · 203.0.113.7",
    ],
    [
      "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
      "198.51.100.1",
      "Edge 131 on Windows · 198.51.100.1",
    ],
    ["Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", null, "Firefox 133 on Linux"],
    [
      "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
      "2001:db8::1",
      "Chrome 131 on Android · 2001:db8::1",
    ],
    [
      "Mozilla/5.0 (Linux; Android 14; Pixel 8; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.0.0 Mobile Safari/537.36",
      "192.0.2.1",
      "Android WebView 120 on Android · 192.0.2.1",
    ],
    [
      "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
      "192.0.2.1",
      "Unknown browser · 192.0.2.1",
    ],
    ["", "192.0.2.1", "Unknown browser · 192.0.2.1"],
    ["definitely not a browser", null, "Unknown browser"],
  ];
  for (const [userAgent, ip, expected] of cases) {
    it(expected, async () => {
      const userId = newUser();
      await issue(userId, { userAgent, ipAddress: ip ?? undefined });
      const [session] = await exports.SessionService.listUserSessions(userId);
      expect(session?.name).toBe(expected);
    });
  }
});

describe("a session's name: the list's SQL writes what sessionName does", () => {
  const rows: [NamedSession, string][] = [
    [
      { browser: "Chrome 131", os: "macOS", ipAddress: "203.0.113.7", supportAgent: null },
      "Chrome 131 on macOS · 203.0.113.7",
    ],
    [{ browser: "Firefox 133", os: "Linux", ipAddress: null, supportAgent: null }, "Firefox 133 on Linux"],
    [{ browser: "Curl", os: "", ipAddress: "", supportAgent: null }, "Curl"],
    [{ browser: null, os: null, ipAddress: "2001:db8::1", supportAgent: null }, "Unknown browser · 2001:db8::1"],
    [{ browser: "", os: "iOS", ipAddress: null, supportAgent: null }, " on iOS"],
    [
      { browser: "Chrome 131", os: "macOS", ipAddress: "192.0.2.1", supportAgent: "agent-7" },
      "Support access by agent-7",
    ],
    [{ browser: null, os: null, ipAddress: null, supportAgent: "" }, "Support access by "],
  ];
  for (const [row, expected] of rows) {
    it(JSON.stringify(expected), async () => {
      const db = drizzle(Object.values(databases())[0] as D1Database);
      const bound = Object.fromEntries(Object.entries(row).map(([key, value]) => [key, sql`${value}`]));
      const answer = await db.get<{ name: string }>(
        sql`SELECT ${sessionNameOf(bound as Record<keyof NamedSession, ReturnType<typeof sql>>)} AS name`,
      );
      expect({ sql: answer?.name, ts: sessionName(row) }).toEqual({ sql: expected, ts: expected });
    });
  }
});

describe("device type", () => {
  const cases: [string, string][] = [
    [
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
      "desktop",
    ],
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "desktop"],
    [
      "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
      "mobile",
    ],
    [
      "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
      "mobile",
    ],
    [
      "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
      "tablet",
    ],
    [
      "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
      "tablet",
    ],
    ["Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "bot"],
    ["curl/8.5.0", "bot"],
    ["", "unknown"],
    ["something else", "unknown"],
  ];
  for (const [userAgent, type] of cases) {
    it(`${type}: ${userAgent.slice(0, 50) || "(empty)"}`, () => {
      expect(parseDevice(userAgent).type).toBe(type);
    });
  }
});
