import { exports } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  bearer,
  CHROME_MAC,
  callWith,
  d1OfUser,
  expectError,
  type Issued,
  issue,
  type Network,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
} from "./helpers.ts";

// Impossible travel (src/domain/client-context.ts): a browser's session remembers the place
// Cloudflare gives each use of its cookie (request.cf.latitude, longitude) and when, and a use
// farther than SESSION_TRAVEL_MIN_KM (2,000 km) that needed more than SESSION_TRAVEL_MAX_KMH
// (1,000 km/h) since is a change of its own kind, judged by SESSION_CONTEXT_TRAVEL (default
// hold) like the other kinds, in the same statements.

// One provider everywhere (Cloudflare WARP's ASN): the network check sees no change, only travel can.
const WARP = 13335;
const NEW_YORK: Network = { country: "US", asn: WARP, latitude: "40.71280", longitude: "-74.00600" };
const NEWARK: Network = { country: "US", asn: WARP, latitude: "40.73570", longitude: "-74.17240" };
const CHICAGO: Network = { country: "US", asn: WARP, latitude: "41.87810", longitude: "-87.62980" };
const LONDON: Network = { country: "GB", asn: WARP, latitude: "51.50740", longitude: "-0.12780" };
const HONG_KONG: Network = { country: "HK", asn: WARP, latitude: "22.31930", longitude: "114.16940" };
/** New York to Hong Kong, great circle (haversine, mean Earth radius 6,371.0088 km), and in 20 minutes. */
const NY_HK_KM = 12955;
const NY_HK_KMH = 38866;

const START = Date.UTC(2026, 10, 2, 10);
const MINUTE = 60_000;
const STEP_UP =
  'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';

type Session = Issued & { userId: string };

async function signedIn(carrier: "cookie" | "both" | "bearer" = "cookie"): Promise<Session> {
  const userId = newUser();
  return { ...(await issue(userId, { country: "US", asn: WARP, carrier })), userId };
}

/** GET /auth/sessions through the cookie (or as Bearer) from `network`, `minutes` after START. */
function listAt(
  session: Issued,
  minutes: number,
  network: Partial<Network>,
  vars: Partial<Env> = {},
  as: "cookie" | "bearer" = "cookie",
) {
  vi.setSystemTime(START + minutes * MINUTE);
  const headers = {
    ...(as === "cookie" ? sessionCookie(session.token) : bearer(session.token)),
    "CF-Connecting-IP": "198.51.100.7",
  };
  return callWith(vars, "GET", "/auth/sessions", headers, undefined, network as Network);
}

async function placeOf(session: Session) {
  return (await d1OfUser(session.userId))
    .prepare(
      "SELECT seen_latitude AS latitude, seen_longitude AS longitude, seen_place_at AS at, context_step_up AS held FROM sessions WHERE id = ?",
    )
    .bind(session.id)
    .first();
}

async function eventsOf(session: Session) {
  const { results } = await (await d1OfUser(session.userId))
    .prepare(
      "SELECT type, reason, context ->> '$.travel' AS travel FROM session_events WHERE session_id = ? ORDER BY id",
    )
    .bind(session.id)
    .all<{ type: string; reason: string | null; travel: string | null }>();
  return results.map(({ type, reason, travel }) => ({ type, reason, travel: travel !== null }));
}

const created = { type: "created", reason: null, travel: false };
const at = (minutes: number) => START + minutes * MINUTE;

// Signed in at START: the log's order is its time's.
beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(START);
});
afterEach(() => {
  vi.useRealTimers();
});

describe("travel: New York, then Hong Kong 20 minutes later, on the same provider", () => {
  it("the event gives both places, the distance and the speed (GET /auth/events, exact body)", async () => {
    const session = await signedIn();
    const vars = { SESSION_CONTEXT_TRAVEL: "log" };
    expect((await listAt(session, 0, NEW_YORK, vars)).status).toBe(200);
    expect((await listAt(session, 20, HONG_KONG, vars)).status).toBe(200);
    expect(await placeOf(session)).toEqual({ latitude: 22.3193, longitude: 114.1694, at: at(20), held: 0 });
    vi.setSystemTime(at(21));
    const headers = { ...sessionCookie(session.token), "CF-Connecting-IP": "198.51.100.7" };
    const response = await callWith(vars, "GET", "/auth/events", headers, undefined, HONG_KONG);
    const { events } = (await response.json()) as { events: object[] };
    expect(events[0]).toEqual({
      id: expect.any(Number),
      type: "context_changed",
      session_id: session.id,
      actor_session_id: session.id,
      ip_address: "198.51.100.7",
      created_at: new Date(at(20)).toISOString(),
      reason: "log",
      new_device: null,
      context: {
        before: { browser: "Chrome", os: "macOS", country: "US", asn: WARP },
        after: { browser: "Chrome", os: "macOS", country: "HK", asn: WARP },
        travel: {
          from: { latitude: 40.7128, longitude: -74.006 },
          to: { latitude: 22.3193, longitude: 114.1694 },
          distance_km: NY_HK_KM,
          speed_kmh: NY_HK_KMH,
        },
      },
    });
    expect(events).toHaveLength(2);
  });

  it("each policy does what it does for the other kinds: ignore, log, hold, end", async () => {
    const WINDOWS_FIREFOX = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0";
    /** What a change met: the answer, the session's row, its events' types and reasons. */
    const outcome = async (session: Session, response: Response) => ({
      status: response.status,
      code: response.status === 200 ? null : ((await response.clone().json()) as { code: string }).code,
      challenge: response.headers.get("WWW-Authenticate"),
      held: ((await placeOf(session)) as { held: number } | null)?.held ?? "ended",
      events: (await eventsOf(session)).map(({ type, reason }) => [type, reason]),
    });
    const outcomes: Record<string, unknown> = {};
    for (const policy of ["ignore", "log", "hold", "end"]) {
      const travelled = await signedIn();
      const vars = { SESSION_CONTEXT_TRAVEL: policy, SESSION_CONTEXT_DEVICE: "ignore" };
      await listAt(travelled, 0, NEW_YORK, vars);
      const byTravel = await outcome(travelled, await listAt(travelled, 20, HONG_KONG, vars));
      // The same policy for a device change, where nothing moved.
      const changed = await signedIn();
      const device = { SESSION_CONTEXT_DEVICE: policy, SESSION_CONTEXT_TRAVEL: "ignore" };
      await listAt(changed, 0, NEW_YORK, device);
      vi.setSystemTime(at(20));
      const headers = {
        ...sessionCookie(changed.token),
        "CF-Connecting-IP": "198.51.100.7",
        "User-Agent": WINDOWS_FIREFOX,
      };
      const byDevice = await outcome(
        changed,
        await callWith(device, "GET", "/auth/sessions", headers, undefined, NEW_YORK),
      );
      expect(byTravel).toEqual(byDevice);
      outcomes[policy] = byTravel;
    }
    const events = (...more: [string, string][]) => [["created", null], ...more];
    expect(outcomes).toEqual({
      ignore: { status: 200, code: null, challenge: null, held: 0, events: events() },
      log: { status: 200, code: null, challenge: null, held: 0, events: events(["context_changed", "log"]) },
      hold: {
        status: 401,
        code: "reauthentication_required",
        challenge: STEP_UP,
        held: 1,
        events: events(["context_changed", "hold"]),
      },
      end: {
        status: 401,
        code: "invalid_token",
        challenge: REJECTED_CHALLENGE,
        held: "ended",
        events: events(["ended", "context_changed"]),
      },
    });
  });

  it("the default is hold: held with the RFC 9470 challenge until the user signs in again", async () => {
    const session = await signedIn();
    expect((await listAt(session, 0, NEW_YORK)).status).toBe(200);
    await expectError(await listAt(session, 20, HONG_KONG), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await eventsOf(session)).toEqual([created, { type: "context_changed", reason: "hold", travel: true }]);
  });

  it("RPC authenticate with the browser's context (latitude and longitude as request.cf gives them) judges it the same", async () => {
    const session = await signedIn();
    const context = (network: Network) => ({
      context: { userAgent: CHROME_MAC, ...network },
      carrier: "cookie" as const,
    });
    vi.setSystemTime(at(0));
    expect(await exports.SessionService.authenticate(session.token, context(NEW_YORK))).toMatchObject({
      sessionId: session.id,
    });
    vi.setSystemTime(at(20));
    expect(await exports.SessionService.authenticate(session.token, context(HONG_KONG))).toMatchObject({
      reauthenticationRequired: true,
    });
    expect(await eventsOf(session)).toEqual([created, { type: "context_changed", reason: "hold", travel: true }]);
  });
});

describe("travel: measured from the last use", () => {
  it("a `both` session polled as Bearer: a cookie replayed 20 minutes after the last cookie use is judged from that use", async () => {
    const session = await signedIn("both");
    expect((await listAt(session, 0, NEW_YORK)).status).toBe(200);
    // The app's Bearer calls keep its activity fresh; the browser is used from New York 8 hours later.
    expect((await listAt(session, 478, NEW_YORK, {}, "bearer")).status).toBe(200);
    expect((await listAt(session, 480, NEW_YORK)).status).toBe(200);
    expect(await placeOf(session)).toEqual({ latitude: 40.7128, longitude: -74.006, at: at(480), held: 0 });
    // 5,570 km in 20 minutes; from the place time of minute 0 it would be 668 km/h, a flight.
    await expectError(await listAt(session, 500, LONDON), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await eventsOf(session)).toEqual([created, { type: "context_changed", reason: "hold", travel: true }]);
  });
});

describe("travel: from the sign-in's place", () => {
  it("create records the place (request.cf's): a cookie from Hong Kong 20 minutes after a sign-in in New York is caught at its first use", async () => {
    const userId = newUser();
    const session = {
      ...(await exports.SessionService.create({ userId, userAgent: CHROME_MAC, carrier: "cookie", ...NEW_YORK })),
      userId,
    };
    expect(await placeOf(session)).toEqual({ latitude: 40.7128, longitude: -74.006, at: at(0), held: 0 });
    await expectError(await listAt(session, 20, HONG_KONG), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await eventsOf(session)).toEqual([created, { type: "context_changed", reason: "hold", travel: true }]);
  });

  it("a malformed or half place at sign-in is none: the first use records its own", async () => {
    for (const place of [{ latitude: "north", longitude: "-74.00600" }, { latitude: "40.71280" }]) {
      const userId = newUser();
      const session = {
        ...(await exports.SessionService.create({ userId, userAgent: CHROME_MAC, carrier: "cookie", ...place })),
        userId,
      };
      expect(await placeOf(session)).toEqual({ latitude: null, longitude: null, at: null, held: 0 });
      expect((await listAt(session, 20, HONG_KONG)).status).toBe(200);
      expect(await placeOf(session)).toEqual({ latitude: 22.3193, longitude: 114.1694, at: at(20), held: 0 });
    }
  });
});

describe("travel: allowed", () => {
  it("another kind's event leaves travel out, so a receiver is told the change that applied (the network)", async () => {
    const session = await signedIn();
    const vars = { SESSION_CONTEXT_TRAVEL: "ignore", SESSION_CONTEXT_NETWORK: "hold" };
    expect((await listAt(session, 0, NEW_YORK, vars)).status).toBe(200);
    const elsewhere = { ...HONG_KONG, asn: 4760 };
    await expectError(await listAt(session, 20, elsewhere, vars), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await eventsOf(session)).toEqual([created, { type: "context_changed", reason: "hold", travel: false }]);
  });
});

describe("travel: what is not", () => {
  it("jitter inside a city, and a provider's gateway in another city below the minimum distance", async () => {
    const session = await signedIn();
    expect((await listAt(session, 0, NEW_YORK)).status).toBe(200);
    // 14 km in a minute (856 km/h), then 1,144 km in five (13,700 km/h, under 2,000 km).
    expect((await listAt(session, 1, NEWARK)).status).toBe(200);
    expect((await listAt(session, 6, CHICAGO)).status).toBe(200);
    expect(await placeOf(session)).toEqual({ latitude: 41.8781, longitude: -87.6298, at: at(6), held: 0 });
    expect(await eventsOf(session)).toEqual([created]);
  });

  it("a long gap makes the speed plausible: New York, then London 8 hours later (696 km/h)", async () => {
    const session = await signedIn();
    expect((await listAt(session, 0, NEW_YORK)).status).toBe(200);
    expect((await listAt(session, 8 * 60, LONDON)).status).toBe(200);
    expect(await eventsOf(session)).toEqual([created]);
  });

  it("missing or malformed coordinates: never travel, and the place last seen is kept with its time", async () => {
    const session = await signedIn();
    expect((await listAt(session, 0, NEW_YORK)).status).toBe(200);
    const newYork = { latitude: 40.7128, longitude: -74.006, at: at(0), held: 0 };
    const { latitude, longitude, ...hongKong } = HONG_KONG;
    for (const [minutes, place] of [
      [5, hongKong],
      [6, { ...hongKong, latitude }],
      [7, { ...hongKong, longitude }],
      [8, { ...hongKong, latitude: "north", longitude }],
      [9, { ...hongKong, latitude: "91.00000", longitude }],
      [10, { ...hongKong, latitude, longitude: "-180.50000" }],
      [11, { ...hongKong, latitude: "", longitude: "" }],
      [12, { ...hongKong, latitude: "1e1", longitude: "0x10" }],
    ] as const) {
      expect((await listAt(session, minutes, place)).status).toBe(200);
      expect(await placeOf(session)).toEqual(newYork);
    }
    // Over RPC too: anything but a place counts as none.
    for (const bad of [{ latitude: 22.3 }, { latitude: "22.3", longitude: null }, { latitude: [1], longitude: {} }]) {
      // Not of ContextInput's types: what a caller without them may send.
      const context = { userAgent: CHROME_MAC, ...hongKong, ...bad } as never;
      expect(await exports.SessionService.authenticate(session.token, { context })).toMatchObject({
        sessionId: session.id,
      });
    }
    expect(await placeOf(session)).toEqual(newYork);
    expect(await eventsOf(session)).toEqual([created]);
    // The place kept is what the next placed use is judged against.
    expect((await listAt(session, 20, HONG_KONG)).status).toBe(401);
    expect(await eventsOf(session)).toEqual([created, { type: "context_changed", reason: "hold", travel: true }]);
  });

  it("a bearer-only session is never judged nor placed; a `both` session's Bearer calls never move its place", async () => {
    const app = await signedIn("bearer");
    expect((await listAt(app, 0, NEW_YORK, {}, "bearer")).status).toBe(200);
    expect((await listAt(app, 20, HONG_KONG, {}, "bearer")).status).toBe(200);
    expect(await placeOf(app)).toEqual({ latitude: null, longitude: null, at: null, held: 0 });
    expect(await eventsOf(app)).toEqual([created]);
    const browser = await signedIn("both");
    expect((await listAt(browser, 0, NEW_YORK)).status).toBe(200);
    expect((await listAt(browser, 20, HONG_KONG, {}, "bearer")).status).toBe(200);
    expect((await listAt(browser, 21, NEW_YORK)).status).toBe(200);
    // The cookie's use at minute 21 is the place's time: the Bearer call wrote the activity, not the place.
    expect(await placeOf(browser)).toEqual({ latitude: 40.7128, longitude: -74.006, at: at(21), held: 0 });
    expect(await eventsOf(browser)).toEqual([created]);
  });
});

describe("travel: what the docs say of a place and of its event (docs/api.md, docs/integrating.md)", () => {
  const signedInAt = async (place: object) => {
    const userId = newUser();
    const create = { userId, userAgent: CHROME_MAC, carrier: "cookie" as const, country: "US", asn: WARP, ...place };
    return { ...(await exports.SessionService.create(create)), userId };
  };

  it("a place is numbers or Cloudflare's decimal strings, at create and in a call's context", async () => {
    const newYork = { latitude: 40.7128, longitude: -74.006, at: at(0), held: 0 };
    expect(await placeOf(await signedInAt({ latitude: 40.7128, longitude: -74.006 }))).toEqual(newYork);
    expect(await placeOf(await signedInAt({ latitude: "40.71280", longitude: "-74.00600" }))).toEqual(newYork);
    // A string of another form is no place, even when it reads as a number.
    for (const latitude of ["4.07128e1", "+40.7128", " 40.7128", "40.71280000001"])
      expect(await placeOf(await signedInAt({ latitude, longitude: "-74.00600" }))).toEqual({
        latitude: null,
        longitude: null,
        at: null,
        held: 0,
      });
    // Numbers in the login flow's context are judged like request.cf's strings.
    const session = await signedInAt({ latitude: "40.71280", longitude: "-74.00600" });
    vi.setSystemTime(at(20));
    const context = { userAgent: CHROME_MAC, country: "HK", asn: WARP, latitude: 22.3193, longitude: 114.1694 };
    expect(await exports.SessionService.authenticate(session.token, { carrier: "cookie", context })).toMatchObject({
      sessionId: session.id,
      reauthenticationRequired: true,
    });
  });

  it("the event's travel is context.travel, and its speed_kmh is null when no time passed since the place last seen", async () => {
    const vars = { SESSION_CONTEXT_TRAVEL: "log" };
    const session = await signedInAt({ latitude: NEW_YORK.latitude, longitude: NEW_YORK.longitude });
    // The first use, in the very millisecond of the sign-in, from Hong Kong.
    expect((await listAt(session, 0, HONG_KONG, vars)).status).toBe(200);
    const headers = { ...sessionCookie(session.token), "CF-Connecting-IP": "198.51.100.7" };
    const response = await callWith(vars, "GET", "/auth/events", headers, undefined, HONG_KONG);
    const { events } = (await response.json()) as { events: object[] };
    expect(events[0]).toEqual({
      id: expect.any(Number),
      type: "context_changed",
      session_id: session.id,
      actor_session_id: session.id,
      ip_address: "198.51.100.7",
      created_at: new Date(at(0)).toISOString(),
      reason: "log",
      new_device: null,
      context: {
        before: { browser: "Chrome", os: "macOS", country: "US", asn: WARP },
        after: { browser: "Chrome", os: "macOS", country: "HK", asn: WARP },
        travel: {
          from: { latitude: 40.7128, longitude: -74.006 },
          to: { latitude: 22.3193, longitude: 114.1694 },
          distance_km: NY_HK_KM,
          speed_kmh: null,
        },
      },
    });
  });
});
