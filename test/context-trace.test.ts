import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { SessionCarrier } from "../src/domain/carrier.ts";
import { CONTEXT_POLICIES, type ContextPolicy, DEFAULT_CONTEXT_POLICIES } from "../src/domain/client-context.ts";
import { bearer, callWith, d1OfUser, type Network, newUser, sessionCookie } from "./helpers.ts";

// The measurement behind the context policies' defaults (BENCHMARKS.md, Session context; run
// alone with `npm run bench:context`): ordinary journeys and thefts, each a login (saying what
// will carry the token, as the login worker does) and then requests with a User-Agent, a
// network (request.cf) and the session cookie or a Bearer header, replayed through the HTTP API
// under each policy. A journey is disturbed when a step is refused (held for step-up, or
// refused as a dead token); a theft is caught when its last step, the thief's, is refused, and
// seen when it is logged.

const UA = {
  chromeMac: (major: number) =>
    `Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${major}.0.0.0 Safari/537.36`,
  iphone:
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
  ipadMobile:
    "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
  // iPadOS asks for desktop sites by default: Safari then says it is a Mac.
  ipadDesktop:
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
  firefoxMac: "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:133.0) Gecko/20100101 Firefox/133.0",
  chromeWindows:
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  // The API clients: a server-side renderer's fetch, an iOS app's URLSession, a command-line tool, a script.
  node: "node",
  iosApp: "MyApp/3 CFNetwork/1490 Darwin/23.0.0",
  androidApp: "okhttp/4.12.0",
  cli: "acme-cli/2.4.0 (linux; x64)",
  script: "python-requests/2.32.3",
};
const NET = {
  telekomMobile: { country: "DE", asn: 3320 },
  vodafoneHome: { country: "DE", asn: 3209 },
  o2Mobile: { country: "DE", asn: 6805 },
  orangeFrance: { country: "FR", asn: 3215 },
  vpnNetherlands: { country: "NL", asn: 9009 },
  brazil: { country: "BR", asn: 28573 },
  awsFrankfurt: { country: "DE", asn: 16509 },
  awsVirginia: { country: "US", asn: 14618 },
} satisfies Record<string, Network>;

/** A request: from where, and with the token as the session cookie (the default) or as Bearer. */
type Step = { userAgent: string; network: Network; bearer?: true };
interface Trace {
  name: string;
  theft: boolean;
  /** What the login said will carry the token: a browser's sign-in is cookie-only. */
  carrier: SessionCarrier;
  /** The login, then each request; a theft's last step is the thief's. */
  steps: Step[];
}

const chrome = UA.chromeMac(131);
const TRACES: Trace[] = [
  {
    name: "mobile addresses churning inside one network",
    theft: false,
    carrier: "cookie",
    steps: Array.from({ length: 4 }, () => ({ userAgent: UA.iphone, network: NET.telekomMobile })),
  },
  {
    name: "home Wi-Fi to mobile data and back",
    theft: false,
    carrier: "cookie",
    steps: [NET.vodafoneHome, NET.telekomMobile, NET.o2Mobile, NET.vodafoneHome].map((network) => ({
      userAgent: UA.iphone,
      network,
    })),
  },
  {
    name: "a flight to another country",
    theft: false,
    carrier: "cookie",
    steps: [NET.telekomMobile, NET.telekomMobile, NET.orangeFrance, NET.orangeFrance].map((network) => ({
      userAgent: UA.iphone,
      network,
    })),
  },
  {
    name: "browser updates (version changes only)",
    theft: false,
    carrier: "cookie",
    steps: [131, 131, 132, 133].map((major) => ({ userAgent: UA.chromeMac(major), network: NET.vodafoneHome })),
  },
  {
    name: "an iPad switching between mobile and desktop User-Agents",
    theft: false,
    carrier: "cookie",
    steps: [UA.ipadMobile, UA.ipadDesktop, UA.ipadMobile].map((userAgent) => ({
      userAgent,
      network: NET.vodafoneHome,
    })),
  },
  {
    name: "a VPN switched on",
    theft: false,
    carrier: "cookie",
    steps: [NET.vodafoneHome, NET.vodafoneHome, NET.vpnNetherlands].map((network) => ({ userAgent: chrome, network })),
  },
  {
    name: "a backend-for-frontend calling with the user's token, between the browser's own requests",
    theft: false,
    carrier: "both",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: UA.node, network: NET.awsFrankfurt, bearer: true },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: UA.node, network: NET.awsVirginia, bearer: true },
    ],
  },
  {
    name: "a native app after an in-app-browser sign-in (ASWebAuthenticationSession, Custom Tabs)",
    theft: false,
    carrier: "bearer",
    steps: [
      { userAgent: UA.iphone, network: NET.telekomMobile },
      { userAgent: UA.iosApp, network: NET.telekomMobile, bearer: true },
      { userAgent: UA.iosApp, network: NET.orangeFrance, bearer: true },
      { userAgent: UA.androidApp, network: NET.brazil, bearer: true },
    ],
  },
  {
    name: "a CLI signed in through the browser, then at home and over a VPN",
    theft: false,
    carrier: "bearer",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: UA.cli, network: NET.vodafoneHome, bearer: true },
      { userAgent: UA.cli, network: NET.vpnNetherlands, bearer: true },
    ],
  },
  {
    name: "the copied cookie's value sent as Bearer from a script, with the browser's User-Agent and network",
    theft: true,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome, bearer: true },
    ],
  },
  {
    name: "the cookie replayed from another country and network, same browser",
    theft: true,
    carrier: "cookie",
    steps: [NET.vodafoneHome, NET.vodafoneHome, NET.brazil].map((network) => ({ userAgent: chrome, network })),
  },
  {
    name: "the cookie replayed from another browser family",
    theft: true,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: UA.firefoxMac, network: NET.o2Mobile },
    ],
  },
  {
    name: "the cookie replayed from another OS in the same network",
    theft: true,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: UA.chromeWindows, network: NET.vodafoneHome },
    ],
  },
  {
    name: "the cookie replayed from another browser, OS, country and network",
    theft: true,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: UA.chromeWindows.replace("Chrome/131.0.0.0 Safari/537.36", "Edg/131.0.0.0"), network: NET.brazil },
    ],
  },
];

type Outcome = "quiet" | "logged" | "held" | "ended";

/**
 * What the trace met: refused at a step (held for step-up, or ended), else logged or quiet. A
 * theft is judged by its last step; the victim's steps before it never change the context.
 */
async function replay(trace: Trace, vars: Partial<Env>): Promise<Outcome> {
  const [login, ...steps] = trace.steps as [Step, ...Step[]];
  const userId = newUser();
  const { id, token } = await exports.SessionService.create({
    userId,
    userAgent: login.userAgent,
    ...login.network,
    carrier: trace.carrier,
  });
  for (const [index, step] of steps.entries()) {
    const { userAgent, network } = step;
    const headers = { ...(step.bearer ? bearer(token) : sessionCookie(token)), "User-Agent": userAgent };
    const response = await callWith(vars, "GET", "/auth/sessions", headers, undefined, network);
    const { code } = response.status === 200 ? { code: "ok" } : ((await response.json()) as { code: string });
    const refused = code === "invalid_token" ? "ended" : code === "reauthentication_required" ? "held" : null;
    if (refused && (!trace.theft || index === steps.length - 1)) return refused;
  }
  const logged = await (await d1OfUser(userId))
    .prepare("SELECT count(*) AS n FROM session_events WHERE session_id = ? AND type = 'context_changed'")
    .bind(id)
    .first<number>("n");
  return logged ? "logged" : "quiet";
}

/**
 * One row of the table, under one pair of policies: ordinary journeys disturbed (refused at
 * some step), of them ended, and logged only; thefts refused, logged only, and missed.
 */
async function measure(device: ContextPolicy, network: ContextPolicy): Promise<number[]> {
  const vars = { SESSION_CONTEXT_DEVICE: device, SESSION_CONTEXT_NETWORK: network };
  const journeys = { disturbed: 0, ended: 0, logged: 0 };
  const thefts = { refused: 0, logged: 0, missed: 0 };
  for (const trace of TRACES) {
    const outcome = await replay(trace, vars);
    const refused = outcome === "held" || outcome === "ended";
    if (trace.theft) {
      if (refused) thefts.refused++;
      else if (outcome === "logged") thefts.logged++;
      else thefts.missed++;
    } else {
      if (refused) journeys.disturbed++;
      if (outcome === "ended") journeys.ended++;
      if (outcome === "logged") journeys.logged++;
    }
  }
  return [...Object.values(journeys), ...Object.values(thefts)];
}

// device, network | journeys: disturbed, ended, logged | thefts: refused, logged, missed
const TABLE: [ContextPolicy, ContextPolicy, number, number, number, number, number, number][] = [
  ["allow", "allow", 0, 0, 0, 1, 0, 4],
  ["log", "allow", 0, 0, 0, 1, 3, 1],
  ["step-up", "allow", 0, 0, 0, 4, 0, 1],
  ["end", "allow", 0, 0, 0, 4, 0, 1],
  ["allow", "log", 0, 0, 2, 1, 2, 2],
  ["allow", "step-up", 2, 0, 0, 3, 0, 2],
  ["allow", "end", 2, 2, 0, 3, 0, 2],
  ["step-up", "log", 0, 0, 2, 4, 1, 0],
];

describe("session context: 9 ordinary journeys and 5 thefts under each policy", () => {
  it("the table covers every policy of each kind, and the defaults", () => {
    const count = (theft: boolean) => TRACES.filter((trace) => trace.theft === theft).length;
    expect({ journeys: count(false), thefts: count(true) }).toEqual({ journeys: 9, thefts: 5 });
    for (const policy of CONTEXT_POLICIES) {
      expect(TABLE.some(([device, network]) => device === policy && network === "allow")).toBe(true);
      expect(TABLE.some(([device, network]) => device === "allow" && network === policy)).toBe(true);
    }
    const [, , disturbed, , , , , missed] = TABLE.find(
      ([device, network]) => device === DEFAULT_CONTEXT_POLICIES.device && network === DEFAULT_CONTEXT_POLICIES.network,
    )!;
    // The goal: no ordinary journey disturbed, no theft unseen.
    expect({ disturbed, missed }).toEqual({ disturbed: 0, missed: 0 });
  });

  for (const [device, network, ...expected] of TABLE) {
    it(`device ${device}, network ${network}`, async () => {
      expect(await measure(device, network)).toEqual(expected);
    });
  }
});
