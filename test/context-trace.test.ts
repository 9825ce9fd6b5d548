import { exports } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sameDeviceAs, sameDeviceKey } from "../src/db/device.ts";
import { ACTIONS } from "../src/domain/actions.ts";
import type { SessionCarrier } from "../src/domain/carrier.ts";
import {
  CONTEXT_KINDS,
  type ContextPolicy,
  clientContext,
  DEFAULT_CONTEXT_POLICIES,
  DEFAULT_TRAVEL_LIMITS,
} from "../src/domain/client-context.ts";
import { deviceKey, isSameDevice } from "../src/domain/device.ts";
import { countingShards } from "./d1.ts";
import { bearer, callWith, d1OfUser, databases, type Network, newUser, sessionCookie } from "./helpers.ts";

// The measurement behind the context policies' defaults (BENCHMARKS.md, Session context; run
// alone with `npm run bench:context`): ordinary journeys and thefts, each a login (saying what
// will carry the token, as the login worker does) and then requests with a User-Agent, a
// network and place (request.cf) and the session cookie or a Bearer header, some minutes apart,
// replayed through the HTTP API under each policy. A journey is disturbed when a step is
// refused (held, or refused as a dead token); a theft is caught when its last step,
// the thief's, is refused, and seen when it is logged. Places are the cities Cloudflare puts the
// addresses in: a mobile carrier's at its gateways, a VPN's at its exit.

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
/** Cities, as request.cf gives their coordinates. */
const AT = {
  frankfurt: { latitude: "50.11090", longitude: "8.68210" },
  berlin: { latitude: "52.52000", longitude: "13.40500" },
  munich: { latitude: "48.13510", longitude: "11.58200" },
  hamburg: { latitude: "53.55110", longitude: "9.99370" },
  dusseldorf: { latitude: "51.22770", longitude: "6.77350" },
  paris: { latitude: "48.85660", longitude: "2.35220" },
  amsterdam: { latitude: "52.36760", longitude: "4.90410" },
  saoPaulo: { latitude: "-23.55050", longitude: "-46.63330" },
  ashburn: { latitude: "39.04380", longitude: "-77.48740" },
  newYork: { latitude: "40.71280", longitude: "-74.00600" },
  chicago: { latitude: "41.87810", longitude: "-87.62980" },
  atlanta: { latitude: "33.74900", longitude: "-84.38800" },
  london: { latitude: "51.50740", longitude: "-0.12780" },
  hongKong: { latitude: "22.31930", longitude: "114.16940" },
  losAngeles: { latitude: "34.05220", longitude: "-118.24370" },
};
const NET = {
  telekomMobile: { country: "DE", asn: 3320, ...AT.frankfurt },
  // The same mobile network's addresses, placed at its other gateways (424 to 612 km apart).
  telekomMobileBerlin: { country: "DE", asn: 3320, ...AT.berlin },
  telekomMobileMunich: { country: "DE", asn: 3320, ...AT.munich },
  telekomMobileHamburg: { country: "DE", asn: 3320, ...AT.hamburg },
  vodafoneHome: { country: "DE", asn: 3209, ...AT.dusseldorf },
  o2Mobile: { country: "DE", asn: 6805, ...AT.munich },
  orangeFrance: { country: "FR", asn: 3215, ...AT.paris },
  vpnNetherlands: { country: "NL", asn: 9009, ...AT.amsterdam },
  vpnNewYork: { country: "US", asn: 9009, ...AT.newYork },
  brazil: { country: "BR", asn: 28573, ...AT.saoPaulo },
  awsFrankfurt: { country: "DE", asn: 16509, ...AT.frankfurt },
  awsVirginia: { country: "US", asn: 14618, ...AT.ashburn },
  // A US mobile carrier's addresses, placed at its eastern gateways (945 to 1,200 km apart).
  tMobileNewYork: { country: "US", asn: 21928, ...AT.newYork },
  tMobileChicago: { country: "US", asn: 21928, ...AT.chicago },
  tMobileAtlanta: { country: "US", asn: 21928, ...AT.atlanta },
  eeLondon: { country: "GB", asn: 12576, ...AT.london },
  // One provider on both sides of the Pacific (Cloudflare WARP), and across one country (Comcast).
  warpNewYork: { country: "US", asn: 13335, ...AT.newYork },
  warpHongKong: { country: "HK", asn: 13335, ...AT.hongKong },
  comcastNewYork: { country: "US", asn: 7922, ...AT.newYork },
  comcastLosAngeles: { country: "US", asn: 7922, ...AT.losAngeles },
} satisfies Record<string, Network>;

/**
 * A request: from where, with the token as the session cookie (the default) or as Bearer, and
 * `after` minutes after the step before (10 unless said: a session in use).
 */
type Step = { userAgent: string; network: Network; bearer?: true; after?: number };
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
    steps: [
      NET.telekomMobile,
      NET.telekomMobile,
      NET.telekomMobileBerlin,
      NET.telekomMobileMunich,
      NET.telekomMobileHamburg,
    ].map((network) => ({ userAgent: UA.iphone, network })),
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
    steps: [
      { userAgent: UA.iphone, network: NET.telekomMobile },
      { userAgent: UA.iphone, network: NET.telekomMobile },
      { userAgent: UA.iphone, network: NET.orangeFrance, after: 120 },
      { userAgent: UA.iphone, network: NET.orangeFrance },
    ],
  },
  {
    name: "a long-haul flight, used at the gate in New York and on landing in London (825 km/h)",
    theft: false,
    carrier: "cookie",
    steps: [
      { userAgent: UA.iphone, network: NET.tMobileNewYork },
      { userAgent: UA.iphone, network: NET.tMobileNewYork },
      { userAgent: UA.iphone, network: NET.eeLondon, after: 405 },
    ],
  },
  {
    name: "a US mobile carrier's addresses placed at its gateways in three cities",
    theft: false,
    carrier: "cookie",
    steps: [NET.tMobileNewYork, NET.tMobileNewYork, NET.tMobileChicago, NET.tMobileAtlanta, NET.tMobileNewYork].map(
      (network) => ({ userAgent: UA.iphone, network }),
    ),
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
    name: "a VPN switched on whose exit is on another continent",
    theft: false,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vpnNewYork, after: 2 },
    ],
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
    steps: [
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.vodafoneHome },
      { userAgent: chrome, network: NET.brazil, after: 20 },
    ],
  },
  {
    name: "the cookie replayed across an ocean on the victim's own provider, same browser",
    theft: true,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.warpNewYork },
      { userAgent: chrome, network: NET.warpNewYork },
      { userAgent: chrome, network: NET.warpHongKong, after: 20 },
    ],
  },
  {
    name: "the cookie replayed across the country on the victim's own provider, same browser",
    theft: true,
    carrier: "cookie",
    steps: [
      { userAgent: chrome, network: NET.comcastNewYork },
      { userAgent: chrome, network: NET.comcastNewYork },
      { userAgent: chrome, network: NET.comcastLosAngeles, after: 30 },
    ],
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
 * What the trace met: refused at a step (held, or ended), else logged or quiet. A
 * theft is judged by its last step; the victim's steps before it never change the context.
 */
async function replay(trace: Trace, vars: Partial<Env>): Promise<Outcome> {
  const [login, ...steps] = trace.steps as [Step, ...Step[]];
  let now = START;
  vi.setSystemTime(now);
  const userId = newUser();
  const { id, token } = await exports.SessionService.create({
    userId,
    userAgent: login.userAgent,
    ...login.network,
    carrier: trace.carrier,
  });
  for (const [index, step] of steps.entries()) {
    const { userAgent, network } = step;
    now += (step.after ?? 10) * 60_000;
    vi.setSystemTime(now);
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

const START = Date.UTC(2026, 10, 2, 8);
beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
});
afterEach(() => {
  vi.useRealTimers();
});

/**
 * One row of the table, under one pair of policies: ordinary journeys disturbed (refused at
 * some step), of them ended, and logged only; thefts refused, logged only, and missed.
 */
async function measure(device: ContextPolicy, network: ContextPolicy, travel: ContextPolicy): Promise<number[]> {
  const vars = { SESSION_CONTEXT_DEVICE: device, SESSION_CONTEXT_NETWORK: network, SESSION_CONTEXT_TRAVEL: travel };
  return tally(vars);
}

/** The journeys and thefts under `vars`: journeys disturbed, ended, logged only; thefts refused, logged only, missed. */
async function tally(vars: Partial<Env>): Promise<number[]> {
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

type Policies = [device: ContextPolicy, network: ContextPolicy, travel: ContextPolicy];

// device, network, travel | journeys: disturbed, ended, logged | thefts: refused, logged, missed
const TABLE: [...Policies, number, number, number, number, number, number][] = [
  ["ignore", "ignore", "ignore", 0, 0, 0, 1, 0, 6],
  ["log", "ignore", "ignore", 0, 0, 0, 1, 3, 3],
  ["hold", "ignore", "ignore", 0, 0, 0, 4, 0, 3],
  ["end", "ignore", "ignore", 0, 0, 0, 4, 0, 3],
  ["ignore", "log", "ignore", 0, 0, 4, 1, 2, 4],
  ["ignore", "hold", "ignore", 4, 0, 0, 3, 0, 4],
  ["ignore", "end", "ignore", 4, 4, 0, 3, 0, 4],
  ["ignore", "ignore", "log", 0, 0, 1, 1, 4, 2],
  ["ignore", "ignore", "hold", 1, 0, 0, 5, 0, 2],
  ["ignore", "ignore", "end", 1, 1, 0, 5, 0, 2],
  ["hold", "log", "ignore", 0, 0, 4, 4, 1, 2],
  ["hold", "log", "hold", 1, 0, 3, 7, 0, 0],
];

/** The policies in force with no var set. */
const DEFAULTS = CONTEXT_KINDS.map((kind) => DEFAULT_CONTEXT_POLICIES[kind]) as Policies;

describe("session context: 12 ordinary journeys and 7 thefts under each policy", () => {
  it("the table covers every policy of each kind, and the defaults", () => {
    const count = (theft: boolean) => TRACES.filter((trace) => trace.theft === theft).length;
    expect({ journeys: count(false), thefts: count(true) }).toEqual({ journeys: 12, thefts: 7 });
    for (const k of CONTEXT_KINDS.keys())
      for (const policy of ACTIONS)
        expect(TABLE.some((row) => row.slice(0, 3).every((p, i) => p === (i === k ? policy : "ignore")))).toBe(true);
    const [, , , disturbed, ended, , , , missed] = TABLE.find((row) =>
      DEFAULTS.every((policy, i) => row[i] === policy),
    )!;
    // The goal: no ordinary journey ended, no theft unseen; the one disturbed is the VPN whose
    // exit is on another continent, where a thief would be.
    expect({ disturbed, ended, missed }).toEqual({ disturbed: 1, ended: 0, missed: 0 });
  });

  for (const [device, network, travel, ...expected] of TABLE) {
    it(`device ${device}, network ${network}, travel ${travel}`, async () => {
      expect(await measure(device, network, travel)).toEqual(expected);
    });
  }
});

// Travel's limits (SESSION_TRAVEL_MAX_KMH, SESSION_TRAVEL_MIN_KM), with travel logged and the
// other kinds allowed: the journeys it flags (false positives) and the thefts (true positives).
// max km/h, min km | journeys flagged | thefts flagged
const LIMITS: [number, number, number, number][] = [
  [1000, 500, 3, 4],
  [1000, 1000, 2, 4],
  [1000, 2000, 1, 4],
  [1000, 3000, 1, 4],
  [1000, 5000, 1, 3],
  [500, 2000, 2, 4],
  [800, 2000, 2, 4],
  [2000, 2000, 1, 4],
];

describe("travel: the journeys and thefts each pair of limits flags", () => {
  it("the defaults are a row", () => {
    const { maxKmh, minKm } = DEFAULT_TRAVEL_LIMITS;
    expect(LIMITS.some(([kmh, km]) => kmh === maxKmh && km === minKm)).toBe(true);
  });

  for (const [maxKmh, minKm, ...expected] of LIMITS) {
    it(`${maxKmh} km/h, ${minKm} km`, async () => {
      const vars = {
        SESSION_CONTEXT_DEVICE: "ignore",
        SESSION_CONTEXT_NETWORK: "ignore",
        SESSION_CONTEXT_TRAVEL: "log",
        SESSION_TRAVEL_MAX_KMH: String(maxKmh),
        SESSION_TRAVEL_MIN_KM: String(minKm),
      };
      const [, , journeys, , thefts] = await tally(vars);
      expect([journeys, thefts]).toEqual(expected);
    });
  }
});

describe("recording the place: a mobile carrier's gateways do not write the row on every request", () => {
  it("rows written by the mobile journeys' requests a minute apart (the sign-in recorded the place)", async () => {
    const written: Record<string, number> = {};
    const mobile = [
      "mobile addresses churning inside one network",
      "a US mobile carrier's addresses placed at its gateways in three cities",
    ];
    for (const trace of TRACES.filter(({ name }) => mobile.includes(name))) {
      const [login, ...steps] = trace.steps as [Step, ...Step[]];
      vi.setSystemTime(START);
      const { token } = await exports.SessionService.create({
        userId: newUser(),
        userAgent: login.userAgent,
        ...login.network,
        carrier: trace.carrier,
      });
      const counter = countingShards(databases());
      for (const [minute, { userAgent, network }] of steps.entries()) {
        vi.setSystemTime(START + (minute + 1) * 60_000);
        const headers = { ...sessionCookie(token), "User-Agent": userAgent };
        expect((await callWith(counter.env, "GET", "/auth/sessions", headers, undefined, network)).status).toBe(200);
      }
      written[trace.name] = counter.rowsWritten();
    }
    // Inside Germany every gateway is within SESSION_TRAVEL_MIN_KM / 4 (500 km) of Frankfurt, the
    // place recorded; the US carrier's are 945 to 1,200 km apart, each a new place.
    expect(written).toEqual({ [mobile[0] as string]: 0, [mobile[1] as string]: 3 });
  });
});

describe("the same device: one rule, the SQL answering as the TypeScript", () => {
  it("on every pair of consecutive uses of the trace, for the context check and the new-device notice", async () => {
    const db = drizzle(Object.values(databases())[0] as D1Database);
    const changed: string[] = [];
    const abroad: string[] = [];
    for (const trace of TRACES) {
      const uses = trace.steps.map(({ userAgent, network }) => clientContext({ userAgent, ...network }));
      for (const [index, after] of uses.slice(1).entries()) {
        const before = uses[index] as (typeof uses)[number];
        // The context check compares the columns last seen, the notice the stored device_key.
        const row = await db.get<{ device: number; key: number }>(
          sql`SELECT ${sameDeviceAs(before, sql`${after.browser}`, sql`${after.os}`)} AS device, ${sameDeviceKey(sql`${deviceKey(after, after.country)}`, before, before.country)} AS key`,
        );
        const same = isSameDevice(before, after);
        expect({ trace: trace.name, index, device: row?.device === 1, key: row?.key === 1 }).toEqual({
          trace: trace.name,
          index,
          device: same,
          key: same && before.country === after.country,
        });
        const face = ({ browser, os }: typeof before) => (browser || os ? `${browser} on ${os}` : "no browser, no OS");
        if (!same) changed.push(`${face(before)} → ${face(after)}`);
        else if (before.country !== after.country) abroad.push(`${face(before)}, ${before.country} → ${after.country}`);
      }
    }
    // An update and Safari's two faces (the iPad's) are the same device; an app's call is none.
    expect(changed).toEqual([
      "Chrome on macOS → no browser, no OS",
      "no browser, no OS → Chrome on macOS",
      "Chrome on macOS → no browser, no OS",
      "Mobile Safari on iOS → no browser, no OS",
      "Chrome on macOS → no browser, no OS",
      "Chrome on macOS → Firefox on macOS",
      "Chrome on macOS → Chrome on Windows",
      "Chrome on macOS → Edge on Windows",
    ]);
    // The same device in another country: a known device for the context check, a new one for the notice.
    expect(abroad).toEqual([
      "Mobile Safari on iOS, DE → FR",
      "Mobile Safari on iOS, US → GB",
      "Chrome on macOS, DE → NL",
      "Chrome on macOS, DE → US",
      "no browser, no OS, DE → FR",
      "no browser, no OS, FR → BR",
      "no browser, no OS, DE → NL",
      "Chrome on macOS, DE → BR",
      "Chrome on macOS, US → HK",
    ]);
  });
});
