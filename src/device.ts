import { parseUserAgent } from "detect-browser";

// detect-browser (2 KB gzip) was chosen over bowser and ua-parser-js@1 (8-9 KB gzip):
// the label needs only a browser, its major version and an OS.

const BROWSERS: Record<string, string> = {
  aol: "AOL",
  android: "Android Browser",
  beaker: "Beaker",
  chrome: "Chrome",
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
  opera: "Opera",
  "opera-mini": "Opera Mini",
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

export interface Device {
  browser: string | null;
  os: string | null;
}

export function parseDevice(userAgent: string): Device {
  const parsed = userAgent ? parseUserAgent(userAgent) : null;
  if (!parsed || parsed.type === "bot") return { browser: null, os: null };
  const name = BROWSERS[parsed.name];
  const major = parsed.version?.split(".")[0];
  const os = parsed.os ?? null;
  return {
    browser: name ? (major ? `${name} ${major}` : name) : null,
    // "Windows 10" is also what Windows 11 reports, so only the family is shown.
    os: os === null ? null : os.startsWith("Windows") ? "Windows" : (OPERATING_SYSTEMS[os] ?? os),
  };
}

/** The list's `name`: e.g. `Chrome 131 on macOS · 203.0.113.7`. */
export function sessionName(userAgent: string, ipAddress: string | null): string {
  const { browser, os } = parseDevice(userAgent);
  const device = `${browser ?? "Unknown browser"}${os ? ` on ${os}` : ""}`;
  return ipAddress ? `${device} · ${ipAddress}` : device;
}
