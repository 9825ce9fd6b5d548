import { parseUserAgent } from "detect-browser";
import type { Device, DeviceType } from "./device.ts";

// detect-browser was chosen over bowser and ua-parser-js@1, a fraction of their bundle size
// (BENCHMARKS.md, Reading): a label needs only a browser, its major version and an OS; the
// device type, which detect-browser lacks, is a few well-known markers (below).

const BROWSERS: Record<string, string> = {
  aol: "AOL",
  android: "Android Browser",
  bb10: "BlackBerry Browser",
  beaker: "Beaker",
  chrome: "Chrome",
  "chromium-webview": "Android WebView",
  crios: "Chrome",
  curl: "curl",
  edge: "Edge",
  "edge-chromium": "Edge",
  "edge-ios": "Edge",
  facebook: "Facebook",
  firefox: "Firefox",
  fxios: "Firefox",
  ie: "Internet Explorer",
  instagram: "Instagram",
  ios: "Mobile Safari",
  "ios-webview": "iOS WebView",
  kakaotalk: "KakaoTalk",
  miui: "MIUI Browser",
  netfront: "NetFront",
  opera: "Opera",
  "opera-mini": "Opera Mini",
  phantomjs: "PhantomJS",
  pie: "Pocket Internet Explorer",
  samsung: "Samsung Internet",
  safari: "Safari",
  silk: "Silk",
  yandexbrowser: "Yandex Browser",
};

const OPERATING_SYSTEMS: Record<string, string> = {
  "Amazon OS": "Fire OS",
  "Android OS": "Android",
  "BlackBerry OS": "BlackBerry",
  "Chrome OS": "ChromeOS",
  "Mac OS": "macOS",
  iOS: "iOS",
  Linux: "Linux",
  "Open BSD": "OpenBSD",
};

const TABLET = /iPad|Tablet|PlayBook|Silk|Kindle|Android(?!.*Mobile)/i;
const MOBILE = /Mobi|iPhone|iPod|Windows Phone|BlackBerry|BB10|Opera Mini/i;
const DESKTOP_OS = new Set(["macOS", "Windows", "Linux", "ChromeOS", "OpenBSD"]);

function deviceType(userAgent: string, os: string | null): DeviceType {
  if (TABLET.test(userAgent)) return "tablet";
  if (MOBILE.test(userAgent) || os === "iOS" || os === "Android") return "mobile";
  return os !== null && DESKTOP_OS.has(os) ? "desktop" : "unknown";
}

// User-Agents parsed lately, per isolate: a browser sends the same one on every request, and
// parsing it walks dozens of regexes. Bounded in entries and in length, so a client cycling
// through User-Agents costs only the parsing it would cost anyway.
const lately = new Map<string, Device>();
const LATELY_MAX = 256;
const LATELY_LONGEST = 512;

export function parseDevice(userAgent: string): Device {
  const known = lately.get(userAgent);
  if (known) return known;
  const device = parsedDevice(userAgent);
  if (userAgent.length <= LATELY_LONGEST) {
    if (lately.size >= LATELY_MAX) lately.clear();
    lately.set(userAgent, device);
  }
  return device;
}

function parsedDevice(userAgent: string): Device {
  const parsed = userAgent ? parseUserAgent(userAgent) : null;
  if (!parsed) return { browser: null, os: null, type: "unknown" };
  if (parsed.type === "bot") return { browser: null, os: null, type: "bot" };
  const name = BROWSERS[parsed.name];
  const major = parsed.version?.split(".")[0];
  const rawOs = parsed.os ?? null;
  // "Windows 10" is also what Windows 11 reports, so only the family is shown.
  const os = rawOs === null ? null : rawOs.startsWith("Windows") ? "Windows" : (OPERATING_SYSTEMS[rawOs] ?? rawOs);
  return {
    browser: name ? (major ? `${name} ${major}` : name) : null,
    os,
    type: parsed.type === "bot-device" ? "bot" : deviceType(userAgent, os),
  };
}
