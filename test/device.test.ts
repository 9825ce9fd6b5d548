import { describe, expect, it } from "vitest";
import { sessionName } from "../src/device.ts";

describe("session name labels", () => {
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
    ["Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "192.0.2.1", "Unknown browser · 192.0.2.1"],
    ["", "192.0.2.1", "Unknown browser · 192.0.2.1"],
    ["definitely not a browser", null, "Unknown browser"],
  ];
  for (const [userAgent, ip, expected] of cases) {
    it(expected, () => {
      expect(sessionName(userAgent, ip)).toBe(expected);
    });
  }
});
