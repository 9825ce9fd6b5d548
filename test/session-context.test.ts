import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { SessionService } from "../src/rpc/session-service.ts";
import { countingShards, D1_MAX_BOUND_PARAMETERS, type RecordedStatement, recordingD1 } from "./d1.ts";
import { challengeIn, deviceKey, signProof } from "./device-keys.ts";
import {
  bearer,
  bindingOfUser,
  CHROME_MAC,
  COOKIE_NAME,
  call,
  callWith,
  d1OfUser,
  databases,
  expectError,
  FIREFOX_WINDOWS,
  type Issued,
  issue,
  type Network,
  newUser,
  REJECTED_CHALLENGE,
  sessionCookie,
  tableSnapshot,
  wrapShards,
} from "./helpers.ts";

// Session context checks (src/domain/client-context.ts): a browser's session (issued with carrier
// `cookie`, as the login worker issues it) remembers the browser, OS, country and network its cookie
// was last used from, and a cookie replayed from elsewhere is judged by SESSION_CONTEXT_DEVICE
// (default hold) and SESSION_CONTEXT_NETWORK (default log), in the operation's one round trip.

const CHROME_WINDOWS =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
const HOME: Network = { country: "DE", asn: 3320 };
const ABROAD: Network = { country: "BR", asn: 28573 };
const STEP_UP =
  'Bearer realm="auth", error="insufficient_user_authentication", error_description="A more recent authentication is required", max_age="0"';
const SEEN_HOME = { browser: "Chrome", os: "macOS", country: "DE", asn: 3320 };

type Session = Issued & { userId: string };

async function signedIn(): Promise<Session> {
  const userId = newUser();
  return { ...(await issue(userId, { country: HOME.country, asn: HOME.asn, carrier: "cookie" })), userId };
}

/** GET /auth/sessions through the session cookie, from the session's own browser and network unless `from` says otherwise. */
function list(session: Issued, from: { userAgent?: string; network?: Network; vars?: Partial<Env> } = {}) {
  const headers = { ...sessionCookie(session.token), "User-Agent": from.userAgent ?? CHROME_MAC };
  return callWith(from.vars ?? {}, "GET", "/auth/sessions", headers, undefined, from.network ?? HOME);
}

async function rowOf(session: Session) {
  return (await d1OfUser(session.userId))
    .prepare(
      "SELECT seen_browser AS browser, seen_os AS os, seen_country AS country, seen_asn AS asn, context_step_up AS held FROM sessions WHERE id = ?",
    )
    .bind(session.id)
    .first();
}

async function eventsOf(session: Session) {
  const { results } = await (await d1OfUser(session.userId))
    .prepare("SELECT type, reason, actor_session_id, context FROM session_events WHERE session_id = ? ORDER BY id")
    .bind(session.id)
    .all<{ type: string; reason: string | null; actor_session_id: string | null; context: string | null }>();
  return results.map((event) => ({ ...event, context: event.context && JSON.parse(event.context) }));
}

const created = { type: "created", reason: null, actor_session_id: null, context: null };
const change = (after: object, before: object = SEEN_HOME) => ({ before, after: { ...SEEN_HOME, ...after } });

describe("session context: recorded", () => {
  it("a session starts where it was issued and is listed with where it was last used (request.cf passes through)", async () => {
    const userId = newUser();
    const session = { ...(await issue(userId, { carrier: "cookie" })), userId };
    expect(await rowOf(session)).toEqual({ browser: "Chrome", os: "macOS", country: null, asn: null, held: 0 });
    const response = await list(session);
    expect(response.status).toBe(200);
    const { sessions } = (await response.json()) as { sessions: { last_seen: unknown }[] };
    expect(sessions.map((listed) => listed.last_seen)).toEqual([SEEN_HOME]);
    expect(await eventsOf(session)).toEqual([created]);
  });

  it("a new browser version, a new address in the same network, a new network in the same country: recorded, nothing else", async () => {
    const session = await signedIn();
    const chrome132 = CHROME_MAC.replace("131.0.0.0", "132.0.0.0");
    expect((await list(session, { userAgent: chrome132, network: { country: "DE", asn: 6805 } })).status).toBe(200);
    expect((await list(session, { userAgent: chrome132, network: { country: "AT", asn: 6805 } })).status).toBe(200);
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, country: "AT", asn: 6805, held: 0 });
    expect(await eventsOf(session)).toEqual([created]);
  });
});

describe("session context: another browser family (default SESSION_CONTEXT_DEVICE = hold)", () => {
  it("refuses the copied token with the RFC 9470 challenge, logs it once, and holds the session until reauthenticate", async () => {
    const session = await signedIn();
    const other = await issue(session.userId, { country: HOME.country, asn: HOME.asn });
    await expectError(await list(session, { userAgent: FIREFOX_WINDOWS }), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    expect(await rowOf(session)).toEqual({ browser: "Firefox", os: "Windows", country: "DE", asn: 3320, held: 1 });
    const logged = { type: "context_changed", reason: "hold", actor_session_id: session.id };
    expect(await eventsOf(session)).toEqual([
      created,
      { ...logged, context: change({ browser: "Firefox", os: "Windows" }) },
    ]);
    // Held: the victim's browser too, for every operation but leaving; nothing ends, nothing is read.
    await expectError(await list(session), 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    for (const [method, path] of [
      ["GET", "/auth/events"],
      ["DELETE", `/auth/sessions/${other.id}`],
      ["DELETE", "/auth/logout"],
      ["DELETE", "/auth/logout?scope=others"],
      ["DELETE", "/auth/logout?scope=all"],
    ] as const) {
      const response = await callWith({}, method, path, sessionCookie(session.token), undefined, HOME);
      await expectError(response, 401, "reauthentication_required", { wwwAuthenticate: STEP_UP });
    }
    expect((await list(other)).status).toBe(200);
    // Back on Chrome: a second change, logged; still held.
    expect(await eventsOf(session)).toHaveLength(3);
    // reauthenticate lifts the hold and kills the copied token.
    const reissued = await exports.SessionService.reauthenticate({
      token: session.token,
      factors: ["pwd"],
      context: { userAgent: CHROME_MAC, country: HOME.country, asn: HOME.asn },
    });
    expect(reissued?.sessionId).toBe(session.id);
    // The security log says this re-authentication lifted the hold.
    expect((await eventsOf(session)).at(-1)).toMatchObject({ type: "reauthenticated", reason: "hold" });
    await expectError(await list(session), 401, "invalid_token", { wwwAuthenticate: REJECTED_CHALLENGE });
    expect((await list({ ...session, token: reissued!.token })).status).toBe(200);
    expect(await rowOf(session)).toMatchObject({ ...SEEN_HOME, held: 0 });
  });

  it("the held session can always leave: its own logout and deleting itself", async () => {
    for (const leave of [
      (s: Session) => callWith({}, "POST", "/auth/logout", sessionCookie(s.token), undefined, HOME),
      (s: Session) => callWith({}, "DELETE", `/auth/sessions/${s.id}`, sessionCookie(s.token), undefined, HOME),
    ]) {
      const session = await signedIn();
      expect((await list(session, { userAgent: FIREFOX_WINDOWS })).status).toBe(401);
      expect((await leave(session)).status).toBe(200);
      expect(await rowOf(session)).toBeNull();
    }
  });

  it("Safari on an iPad or iPhone asking for desktop sites (Safari on macOS) is the same device; Chrome on the Mac is not", async () => {
    const ipad =
      "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const desktop =
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
    const userId = newUser();
    const session = { ...(await issue(userId, { userAgent: ipad, ...HOME, carrier: "cookie" })), userId };
    expect((await list(session, { userAgent: desktop })).status).toBe(200);
    expect((await list(session, { userAgent: ipad })).status).toBe(200);
    expect((await eventsOf(session)).map((event) => event.type)).toEqual(["created"]);
    await expectError(await list(session, { userAgent: CHROME_MAC }), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
  });

  it("another OS in the same network, and a stripped User-Agent, are device changes too", async () => {
    for (const userAgent of [CHROME_WINDOWS, ""]) {
      const session = await signedIn();
      await expectError(await list(session, { userAgent }), 401, "reauthentication_required", {
        wwwAuthenticate: STEP_UP,
      });
    }
  });

  it("costs no round trip of its own", async () => {
    const session = await signedIn();
    const counter = countingShards(databases());
    const headers = { ...sessionCookie(session.token), "User-Agent": FIREFOX_WINDOWS };
    const response = await callWith(counter.env, "GET", "/auth/sessions", headers, undefined, ABROAD);
    expect({ status: response.status, roundTrips: counter.roundTrips() }).toEqual({
      status: 401,
      roundTrips: { [await bindingOfUser(session.userId)]: 1 },
    });
  });
});

describe("session context: rows written per change (D1's rows_written, index entries included)", () => {
  it("unchanged 0; ignore 1 (the session's seen columns); log and hold 3 (and the event with its 2 index entries); end 3 (the event; D1 counts no row for the DELETE)", async () => {
    const written: Record<string, number> = {};
    for (const policy of ["unchanged", "ignore", "log", "hold", "end"] as const) {
      const session = await signedIn();
      const counter = countingShards(databases());
      const vars = { ...counter.env, ...(policy === "unchanged" ? {} : { SESSION_CONTEXT_DEVICE: policy }) };
      await list(session, { userAgent: policy === "unchanged" ? CHROME_MAC : FIREFOX_WINDOWS, vars });
      written[policy] = counter.rowsWritten();
    }
    expect(written).toEqual({ unchanged: 0, ignore: 1, log: 3, hold: 3, end: 3 });
  });

  it("a Bearer call from another browser and network writes nothing: it is not judged", async () => {
    const userId = newUser();
    const { token } = await issue(userId, { country: HOME.country, asn: HOME.asn, carrier: "both" });
    const counter = countingShards(databases());
    const headers = { ...bearer(token), "User-Agent": FIREFOX_WINDOWS };
    const response = await callWith(counter.env, "GET", "/auth/sessions", headers, undefined, ABROAD);
    expect({ status: response.status, written: counter.rowsWritten() }).toEqual({ status: 200, written: 0 });
  });
});

describe("session context: each policy", () => {
  const device = (policy: string) => ({ SESSION_CONTEXT_DEVICE: policy });
  const network = (policy: string) => ({ SESSION_CONTEXT_NETWORK: policy });
  const firefox = { browser: "Firefox", os: "Windows" };
  const logged = (session: Session, after: object, type = "context_changed", reason = "log") => ({
    type,
    reason,
    actor_session_id: session.id,
    context: change(after),
  });

  it("the spellings these settings had before the one list of actions still read: allow ignores, step-up holds", async () => {
    const ignored = await signedIn();
    const formerIgnore = { ...device("allow"), ...network("allow") };
    expect((await list(ignored, { userAgent: FIREFOX_WINDOWS, network: ABROAD, vars: formerIgnore })).status).toBe(200);
    expect(await eventsOf(ignored)).toEqual([created]);
    const held = await signedIn();
    await expectError(
      await list(held, { userAgent: FIREFOX_WINDOWS, vars: device("step-up") }),
      401,
      "reauthentication_required",
      {
        wwwAuthenticate: STEP_UP,
      },
    );
    expect(await rowOf(held)).toEqual({ ...SEEN_HOME, ...firefox, held: 1 });
    expect(await eventsOf(held)).toEqual([created, logged(held, firefox, "context_changed", "hold")]);
  });

  it("a value that names no action: 500 with one config_error line listing the actions, nothing recorded", async () => {
    const session = await signedIn();
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation((line: unknown) => void logged.push(String(line)));
    vi.spyOn(console, "log").mockImplementation(() => {});
    await expectError(
      await list(session, { userAgent: FIREFOX_WINDOWS, vars: device("block") }),
      500,
      "internal_error",
      {
        cacheControl: "no-store",
      },
    );
    vi.restoreAllMocks();
    expect(logged.map((line) => JSON.parse(line))).toEqual([
      {
        level: "error",
        event: "config_error",
        message: "SESSION_CONTEXT_DEVICE must be one of ignore, log, hold, end",
        method: "GET",
        route: "/auth/sessions",
        request_id: expect.any(String),
      },
    ]);
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, held: 0 });
    expect(await eventsOf(session)).toEqual([created]);
  });

  it("ignore: recorded silently", async () => {
    const session = await signedIn();
    const vars = { ...device("ignore"), ...network("ignore") };
    expect((await list(session, { userAgent: FIREFOX_WINDOWS, vars })).status).toBe(200);
    expect((await list(session, { userAgent: FIREFOX_WINDOWS, network: ABROAD, vars })).status).toBe(200);
    expect(await rowOf(session)).toEqual({ ...firefox, ...ABROAD, held: 0 });
    expect(await eventsOf(session)).toEqual([created]);
  });

  it("log: logged and recorded, the request answered", async () => {
    const session = await signedIn();
    expect((await list(session, { userAgent: FIREFOX_WINDOWS, vars: device("log") })).status).toBe(200);
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, ...firefox, held: 0 });
    expect(await eventsOf(session)).toEqual([created, logged(session, firefox)]);
  });

  it("network log (the default): another country and ASN is logged, the request answered", async () => {
    const session = await signedIn();
    expect((await list(session, { network: ABROAD })).status).toBe(200);
    expect(await eventsOf(session)).toEqual([created, logged(session, ABROAD)]);
  });

  it("network hold: a session that has no network recorded yet is not held by its first one (an unknown is no change)", async () => {
    const userId = newUser();
    const session = { ...(await issue(userId, { carrier: "cookie" })), userId };
    expect((await list(session, { network: ABROAD, vars: network("hold") })).status).toBe(200);
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, ...ABROAD, held: 0 });
    expect(await eventsOf(session)).toEqual([created]);
  });

  it("network hold: held", async () => {
    const session = await signedIn();
    await expectError(
      await list(session, { network: ABROAD, vars: network("hold") }),
      401,
      "reauthentication_required",
      {
        wwwAuthenticate: STEP_UP,
      },
    );
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, ...ABROAD, held: 1 });
    expect(await eventsOf(session)).toEqual([created, logged(session, ABROAD, "context_changed", "hold")]);
  });

  it("both kinds at once: the stricter policy's reason is recorded", async () => {
    const session = await signedIn();
    const vars = { ...device("log"), ...network("hold") };
    expect((await list(session, { userAgent: FIREFOX_WINDOWS, network: ABROAD, vars })).status).toBe(401);
    expect(await eventsOf(session)).toEqual([
      created,
      logged(session, { ...firefox, ...ABROAD }, "context_changed", "hold"),
    ]);
  });

  it("end: the session ends (`ended`, reason context_changed), the request is refused as for a dead token", async () => {
    for (const [from, vars, after] of [
      [{ userAgent: FIREFOX_WINDOWS }, device("end"), firefox],
      [{ network: ABROAD }, network("end"), ABROAD],
    ] as const) {
      const session = await signedIn();
      await expectError(await list(session, { ...from, vars }), 401, "invalid_token", {
        wwwAuthenticate: REJECTED_CHALLENGE,
      });
      expect(await rowOf(session)).toBeNull();
      expect(await eventsOf(session)).toEqual([created, logged(session, after, "ended", "context_changed")]);
    }
  });

  it("a device-bound session is not judged: its key proves the device", async () => {
    const userId = newUser();
    const issued = (await exports.SessionService.create({
      userId,
      userAgent: CHROME_MAC,
      deviceBound: true,
    })) as Issued & {
      secureSessionRegistration: string;
      boundCookie: string;
    };
    const key = await deviceKey();
    const registered = await call("POST", "/auth/dbsc/registration", {
      Cookie: `${COOKIE_NAME}=${issued.token}`,
      "Secure-Session-Response": `"${await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true })}"`,
    });
    expect(registered.status).toBe(200);
    const bound = /=([^;]+);/.exec(issued.boundCookie)?.[1];
    const headers = {
      Cookie: `${COOKIE_NAME}=${issued.token}; ${COOKIE_NAME}-bound=${bound}`,
      "User-Agent": FIREFOX_WINDOWS,
    };
    const response = await callWith(
      { SESSION_CONTEXT_DEVICE: "end" },
      "DELETE",
      "/auth/logout?scope=others",
      headers,
      undefined,
      ABROAD,
    );
    expect(response.status).toBe(200);
    const session = { ...issued, userId };
    expect(await rowOf(session)).toEqual({ browser: "Firefox", os: "Windows", ...ABROAD, held: 0 });
    expect((await eventsOf(session)).map((event) => event.type)).toEqual(["created", "device_bound"]);
  });

  it("D1's 100 bound values hold at the worst case: every kind under `end`, Safari's two faces, a bound cookie, a place", async () => {
    const safari =
      "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
    const userId = newUser();
    const issued = (await exports.SessionService.create({
      userId,
      userAgent: safari,
      deviceBound: true,
    })) as Issued & { secureSessionRegistration: string; boundCookie: string };
    const key = await deviceKey();
    const registered = await call("POST", "/auth/dbsc/registration", {
      Cookie: `${COOKIE_NAME}=${issued.token}`,
      "User-Agent": safari,
      "Secure-Session-Response": `"${await signProof(key, challengeIn(issued.secureSessionRegistration), { withKey: true })}"`,
    });
    expect(registered.status).toBe(200);
    const bound = /=([^;]+);/.exec(issued.boundCookie)?.[1];
    const headers = { Cookie: `${COOKIE_NAME}=${issued.token}; ${COOKIE_NAME}-bound=${bound}`, "User-Agent": safari };
    const vars = { SESSION_CONTEXT_DEVICE: "end", SESSION_CONTEXT_NETWORK: "end", SESSION_CONTEXT_TRAVEL: "end" };
    const placed = { ...ABROAD, latitude: "-23.55050", longitude: "-46.63330" };
    const recorded: RecordedStatement[][] = [];
    const recording = wrapShards((d1) => {
      const { db, statements } = recordingD1(d1);
      recorded.push(statements);
      return db;
    });
    // The head of each operation by token, and each one's own statements (nothing is ended: a bound session is not judged).
    for (const [method, path] of [
      ["GET", "/auth/whoami"],
      ["GET", "/auth/events"],
      ["DELETE", "/auth/logout?scope=others"],
      ["GET", "/auth/sessions"],
    ] as const) {
      expect((await callWith({ ...vars, ...recording }, method, path, headers, undefined, placed)).status).toBe(200);
    }
    const most = Math.max(...recorded.flat().map(({ params }) => params.length));
    expect(most).toBeLessThanOrEqual(D1_MAX_BOUND_PARAMETERS);
  });

  it("a setting that is not a policy is refused like any bad setting", async () => {
    const session = await signedIn();
    for (const vars of [device("block"), network("Log"), device("stepup")]) {
      await expectError(await list(session, { vars }), 500, "internal_error");
    }
  });
});

describe("session context: SessionService", () => {
  it("authenticate without a context judges nothing; with one, judges it and says when the session is held", async () => {
    const session = await signedIn();
    const firefox = { userAgent: FIREFOX_WINDOWS, country: HOME.country, asn: HOME.asn };
    expect(await exports.SessionService.authenticate(session.token)).toMatchObject({ sessionId: session.id });
    expect(await exports.SessionService.authenticate(session.token, { context: {} })).toMatchObject({
      sessionId: session.id,
      reauthenticationRequired: true,
    });
    expect(await rowOf(session)).toEqual({ browser: "", os: "", country: "DE", asn: 3320, held: 1 });
    const again = await exports.SessionService.authenticate(session.token, { context: firefox });
    expect(again?.reauthenticationRequired).toBe(true);
    const fresh = await signedIn();
    const answer = await exports.SessionService.authenticate(fresh.token, {
      context: { userAgent: CHROME_MAC, country: "DE", asn: 3320 },
    });
    expect(answer && "reauthenticationRequired" in answer).toBe(false);
    // Called in-process: a rejection through the RPC stub is reported by the pool as uncaught.
    const service = new SessionService(createExecutionContext(), env);
    await expect(service.authenticate(fresh.token, { context: "Firefox" as never })).rejects.toThrow(
      "context must be an object of userAgent, country, asn, latitude and longitude",
    );
  });
});

// The clients the interface names, each with its own User-Agent: an app's HTTP client after an
// in-app-browser sign-in, a backend-for-frontend calling with the user's token, a CLI.
const API_CLIENTS = ["okhttp/4.12.0", "MyApp/3 CFNetwork/1490 Darwin/23.0.0", "node", "curl/8.5.0"];
// What each route answers to a token it refuses: the contract's 401 for that route.
const ROUTES = [
  ["GET", "/auth/sessions", 401, "invalid_token"],
  ["GET", "/auth/events", 401, "invalid_token"],
  ["DELETE", "/auth/sessions/", 401, "invalid_token"],
  ["DELETE", "/auth/logout?scope=others", 401, "session_invalid"],
  ["DELETE", "/auth/logout", 401, "session_invalid"],
  ["POST", "/auth/logout", 400, "session_invalid"],
] as const;

describe("session context: every client the interface names (src/domain/carrier.ts)", () => {
  it("a Bearer call from its own User-Agent and network works on a session that accepts Bearer, and never holds it for the browser", async () => {
    for (const carrier of ["both", undefined] as const) {
      const userId = newUser();
      const session = { ...(await issue(userId, { country: HOME.country, asn: HOME.asn, carrier })), userId };
      for (const userAgent of API_CLIENTS) {
        const other = await issue(userId, { country: HOME.country, asn: HOME.asn });
        const headers = { ...bearer(session.token), "User-Agent": userAgent };
        for (const [method, path] of [
          ["GET", "/auth/sessions"],
          ["GET", "/auth/events"],
          ["DELETE", `/auth/sessions/${other.id}`],
        ] as const) {
          expect([
            carrier,
            userAgent,
            path,
            (await callWith({}, method, path, headers, undefined, ABROAD)).status,
          ]).toEqual([carrier, userAgent, path, 200]);
        }
      }
      const others = await callWith(
        {},
        "DELETE",
        "/auth/logout?scope=others",
        bearer(session.token),
        undefined,
        ABROAD,
      );
      expect(others.status).toBe(200);
      // The browser's next call, through its cookie, from where it signed in: still signed in, nothing logged.
      expect((await list(session)).status).toBe(200);
      expect(await rowOf(session)).toEqual({ ...SEEN_HOME, held: 0 });
      expect((await eventsOf(session)).map((event) => event.type)).toEqual(["created"]);
      const curl = { ...bearer(session.token), "User-Agent": "curl/8.5.0" };
      const all = await callWith({}, "DELETE", "/auth/logout", curl);
      expect(all.status).toBe(200);
    }
  });

  it("a cookie-only session's value sent as Bearer proves nothing, from any User-Agent, on every route: nothing changes", async () => {
    const session = await signedIn();
    const before = await tableSnapshot();
    for (const userAgent of [CHROME_MAC, "python-requests/2.32.3"]) {
      for (const [method, path, status, code] of ROUTES) {
        const headers = { ...bearer(session.token), "User-Agent": userAgent };
        const target = path === "/auth/sessions/" ? `${path}${session.id}` : path;
        const response = await callWith({}, method, target, headers, undefined, HOME);
        await expectError(response, status, code, { wwwAuthenticate: status === 401 ? REJECTED_CHALLENGE : null });
      }
    }
    expect(await tableSnapshot()).toEqual(before);
    expect(await exports.SessionService.authenticate(session.token, { carrier: "bearer" })).toBeNull();
    expect((await list(session)).status).toBe(200);
  });

  it("the copied cookie from another browser is held, however it is replayed; the same value as Bearer is refused as a dead token", async () => {
    const session = await signedIn();
    await expectError(await list(session, { userAgent: FIREFOX_WINDOWS }), 401, "reauthentication_required", {
      wwwAuthenticate: STEP_UP,
    });
    const script = { ...bearer(session.token), "User-Agent": FIREFOX_WINDOWS };
    await expectError(await callWith({}, "GET", "/auth/sessions", script), 401, "invalid_token", {
      wwwAuthenticate: REJECTED_CHALLENGE,
    });
  });

  it("an app's session (carrier bearer) works as Bearer from anywhere, is never judged, and its token is refused as a cookie", async () => {
    const userId = newUser();
    const session = { ...(await issue(userId, { country: HOME.country, asn: HOME.asn, carrier: "bearer" })), userId };
    for (const userAgent of [...API_CLIENTS, FIREFOX_WINDOWS]) {
      const headers = { ...bearer(session.token), "User-Agent": userAgent };
      expect(
        (await callWith({ SESSION_CONTEXT_NETWORK: "end" }, "GET", "/auth/sessions", headers, undefined, ABROAD))
          .status,
      ).toBe(200);
    }
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, held: 0 });
    await expectError(await list(session), 401, "invalid_token", { wwwAuthenticate: REJECTED_CHALLENGE });
    expect(await exports.SessionService.authenticate(session.token, { carrier: "cookie" })).toBeNull();
    expect((await eventsOf(session)).map((event) => event.type)).toEqual(["created"]);
  });

  it("a session issued without a carrier keeps the contract from before the check: either carrier, from any client, never judged", async () => {
    const userId = newUser();
    const session = { ...(await issue(userId, { country: HOME.country, asn: HOME.asn })), userId };
    const vars = { SESSION_CONTEXT_DEVICE: "end", SESSION_CONTEXT_NETWORK: "end" };
    expect((await list(session, { userAgent: FIREFOX_WINDOWS, network: ABROAD, vars })).status).toBe(200);
    const headers = { ...bearer(session.token), "User-Agent": "okhttp/4.12.0" };
    expect((await callWith(vars, "GET", "/auth/sessions", headers, undefined, ABROAD)).status).toBe(200);
    expect(await rowOf(session)).toEqual({ ...SEEN_HOME, held: 0 });
  });

  it("RPC: authenticate and reauthenticate with a context follow the same rule for each kind of session", async () => {
    const firefox = { userAgent: FIREFOX_WINDOWS, country: HOME.country, asn: HOME.asn };
    const held = async (carrier: "cookie" | "bearer" | "both" | undefined, options: object) => {
      const userId = newUser();
      const { token } = await issue(userId, { country: HOME.country, asn: HOME.asn, carrier });
      const answer = await exports.SessionService.authenticate(token, { context: firefox, ...options });
      return answer === null ? "refused" : (answer.reauthenticationRequired ?? false);
    };
    expect({
      cookie: await held("cookie", {}),
      "cookie as cookie": await held("cookie", { carrier: "cookie" }),
      "cookie as bearer": await held("cookie", { carrier: "bearer" }),
      both: await held("both", {}),
      "both as bearer": await held("both", { carrier: "bearer" }),
      bearer: await held("bearer", {}),
      "bearer as cookie": await held("bearer", { carrier: "cookie" }),
      unsaid: await held(undefined, {}),
    }).toEqual({
      cookie: true,
      "cookie as cookie": true,
      "cookie as bearer": "refused",
      both: true,
      "both as bearer": false,
      bearer: false,
      "bearer as cookie": "refused",
      unsaid: false,
    });
    const session = await signedIn();
    const refused = await exports.SessionService.reauthenticate({
      token: session.token,
      factors: ["pwd"],
      carrier: "bearer",
    });
    expect(refused).toBeNull();
    const reissued = await exports.SessionService.reauthenticate({
      token: session.token,
      factors: ["pwd"],
      carrier: "cookie",
      context: firefox,
    });
    expect(reissued?.sessionId).toBe(session.id);
  });

  it("bad input: a carrier that is not one, or a device-bound app session, is a TypeError and writes nothing", async () => {
    const service = new SessionService(createExecutionContext(), env);
    const before = await tableSnapshot();
    const userId = newUser();
    await expect(service.create({ userId, carrier: "header" as never })).rejects.toThrow(
      'carrier must be one of "cookie", "bearer", "both"',
    );
    await expect(service.create({ userId, carrier: "bearer", deviceBound: true })).rejects.toThrow(
      'deviceBound needs a carrier other than "bearer"',
    );
    await expect(service.authenticate("x.y", { carrier: "both" as never })).rejects.toThrow(
      'carrier must be "cookie" or "bearer"',
    );
    expect(await tableSnapshot()).toEqual(before);
  });
});
