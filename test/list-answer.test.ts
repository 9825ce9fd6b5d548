import { exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import {
  CHROME_MAC,
  call,
  callWith,
  d1OfUser,
  FIREFOX_WINDOWS,
  issue,
  type Network,
  newUser,
  sessionCookie,
} from "./helpers.ts";

// The list's and the security log's answers are written by SQLite (src/db/session-view.ts,
// src/db/event-view.ts). This holds them byte for byte
// to the renderer the worker used before: rows read from the table as they are, decoded and
// rendered here in JavaScript, serialized by JSON.stringify, for every branch of every member.

interface Row {
  id: string;
  ip_address: string | null;
  user_agent: string;
  browser: string | null;
  os: string | null;
  device_type: string;
  country: string | null;
  city: string | null;
  created_at: number;
  expires_at: number;
  last_active_at: number;
  dbsc_key_thumbprint: string | null;
  seen_browser: string | null;
  seen_os: string | null;
  seen_country: string | null;
  seen_asn: number | null;
  support_agent: string | null;
  support_reason: string | null;
  upstream: string | null;
  upstream_subject: string | null;
  upstream_sid: string | null;
  organization_id: string | null;
}

/** The worker's renderer before the list was written by SQLite, as it was. */
function renderedBefore(row: Row, backend: boolean) {
  const actor = row.support_agent === null ? undefined : { sub: row.support_agent, reason: row.support_reason ?? "" };
  const label = `${row.browser ?? "Unknown browser"}${row.os ? ` on ${row.os}` : ""}`;
  const view = {
    id: row.id,
    name: actor ? `Support access by ${actor.sub}` : row.ip_address ? `${label} · ${row.ip_address}` : label,
    ip_address: row.ip_address ?? "",
    user_agent: row.user_agent,
    created_at: new Date(row.created_at).toISOString(),
    expires_at: new Date(row.expires_at).toISOString(),
    last_active_at: new Date(row.last_active_at).toISOString(),
    location: [row.city, row.country].filter(Boolean).join(", ") || null,
    device: { browser: row.browser, os: row.os, type: row.device_type },
    ...(row.dbsc_key_thumbprint === null ? {} : { device_bound: true as const }),
    last_seen:
      row.seen_browser === null
        ? null
        : { browser: row.seen_browser || null, os: row.seen_os || null, country: row.seen_country, asn: row.seen_asn },
    ...(actor ? { actor } : {}),
  };
  if (!backend) return view;
  // A backend's list also says each session's organization (null: none), after the upstream.
  const upstream =
    row.upstream === null
      ? {}
      : { upstream: { provider: row.upstream, subject: row.upstream_subject ?? "", sid: row.upstream_sid } };
  return { ...view, ...upstream, organization: row.organization_id };
}

async function rowsOf(userId: string): Promise<Row[]> {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT * FROM sessions WHERE user_id = ? ORDER BY created_at DESC, id DESC")
    .bind(userId)
    .all<Row>();
  return results;
}

/** Sets columns no public call sets to these values (a bound key, odd times, empty seen values). */
async function setColumns(userId: string, id: string, values: Record<string, string | number | null>): Promise<void> {
  const columns = Object.keys(values);
  await (await d1OfUser(userId))
    .prepare(`UPDATE sessions SET ${columns.map((c) => `${c} = ?`).join(", ")} WHERE id = ?`)
    .bind(...Object.values(values), id)
    .run();
}

describe("the list's answer, byte for byte as the worker rendered it", () => {
  it("every member's every branch, over HTTP and over RPC", async () => {
    const userId = newUser();
    const odd = 'Mozilla/5.0 "quoted" \\ back/slash é ü 中文 😀 \u2028 <script>';
    const caller = await issue(userId, { country: "DE", city: "Berlin", asn: 3320 });
    const sessions = [
      await issue(userId, { userAgent: odd, ipAddress: "2001:db8::1", country: "JP" }),
      await issue(userId, { userAgent: "", ipAddress: undefined, city: "Lagos" }),
      await issue(userId, { userAgent: "curl/8.5.0", country: "", city: "" }),
      await exports.SessionService.openSupportSession({ userId, agentId: "agent-7", reason: 'ticket "#42" — ü' }),
    ];
    const [odd1, none, curl, support] = sessions.map((s) => s.id) as [string, string, string, string];
    // The caller is used from its browser (last_seen recorded), and the others get what no call sets.
    expect(
      (await call("GET", "/auth/whoami", { ...sessionCookie(caller.token), "User-Agent": CHROME_MAC })).status,
    ).toBe(200);
    await setColumns(userId, odd1, {
      dbsc_key_thumbprint: "thumb",
      seen_browser: "",
      seen_os: "",
      seen_country: null,
      seen_asn: null,
    });
    await setColumns(userId, none, { created_at: 1_830_297_599_999, last_active_at: 1_830_297_599_007 });
    await setColumns(userId, curl, {
      created_at: 951_782_400_070,
      expires_at: 4_102_444_800_000,
      seen_browser: "Curl",
      seen_os: "Linux",
      seen_asn: 0,
    });
    await setColumns(userId, support, { created_at: 1_000_000_000_000 });
    await setColumns(userId, none, { upstream: "okta", upstream_subject: 'sub "x"', upstream_sid: null });
    // A member's session, its organization's policy row beside it as a create would have found it.
    const organization = "org_AAAAAAAAAAAAAAAAAAAAAA";
    await (await d1OfUser(userId))
      .prepare("INSERT OR IGNORE INTO organization_policies (organization_id, updated_at) VALUES (?, 0)")
      .bind(organization)
      .run();
    await setColumns(userId, curl, { organization_id: organization });

    const response = await call("GET", "/auth/sessions", { ...sessionCookie(caller.token), "User-Agent": CHROME_MAC });
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("application/json");
    const rows = await rowsOf(userId);
    expect(rows).toHaveLength(5);
    const expected = JSON.stringify({
      sessions: rows.map((row) => renderedBefore(row, false)),
      currentSessionId: caller.id,
    });
    expect(await response.text()).toBe(expected);

    const listed = await exports.SessionService.listUserSessions(userId);
    expect(JSON.stringify(listed)).toBe(JSON.stringify(rows.map((row) => renderedBefore(row, true))));
  });

  it("a user with no other session: the caller alone", async () => {
    const userId = newUser();
    const caller = await issue(userId, { ipAddress: undefined });
    const response = await call("GET", "/auth/sessions", { ...sessionCookie(caller.token), "User-Agent": CHROME_MAC });
    const rows = await rowsOf(userId);
    expect(await response.text()).toBe(
      JSON.stringify({ sessions: rows.map((row) => renderedBefore(row, false)), currentSessionId: caller.id }),
    );
  });

  it("a user with none: an empty list over RPC", async () => {
    expect(await exports.SessionService.listUserSessions(newUser())).toEqual([]);
  });
});

interface EventRow {
  id: number;
  type: string;
  session_id: string;
  actor_session_id: string | null;
  ip_address: string | null;
  created_at: number;
  reason: string | null;
  new_device: number | null;
  context: string | null;
  support_agent: string | null;
  admin_key_id: string | null;
}

/** The worker's renderer of an event before the log was written by SQLite, as it was. */
function eventRenderedBefore(row: EventRow) {
  return {
    id: row.id,
    type: row.type,
    session_id: row.session_id,
    actor_session_id: row.actor_session_id,
    ip_address: row.ip_address,
    created_at: new Date(row.created_at).toISOString(),
    reason: row.reason,
    new_device: row.new_device === null ? null : Boolean(row.new_device),
    ...(row.context === null ? {} : { context: JSON.parse(row.context) }),
    ...(row.support_agent === null ? {} : { actor: { sub: row.support_agent } }),
    ...(row.admin_key_id === null ? {} : { admin_key_id: row.admin_key_id }),
  };
}

describe("the security log's answer, byte for byte as the worker rendered it", () => {
  it("created, ended, context changes with travel (whole-degree places), support access, an admin key's", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.UTC(2026, 10, 2, 10));
    const userId = newUser();
    const caller = await issue(userId, { country: "US", asn: 13335, carrier: "cookie" });
    const other = await issue(userId, { userAgent: FIREFOX_WINDOWS, ipAddress: "198.51.100.9" });
    await exports.SessionService.openSupportSession({ userId, agentId: "agent-7", reason: "ticket 42" });
    const vars = { SESSION_CONTEXT_TRAVEL: "log", SESSION_CONTEXT_NETWORK: "log" };
    const from = (network: Network) =>
      callWith(
        vars,
        "GET",
        "/auth/whoami",
        { ...sessionCookie(caller.token), "User-Agent": CHROME_MAC },
        undefined,
        network,
      );
    vi.setSystemTime(Date.UTC(2026, 10, 2, 10, 1));
    expect((await from({ country: "US", asn: 13335, latitude: "40.00000", longitude: "-74.00000" })).status).toBe(200);
    vi.setSystemTime(Date.UTC(2026, 10, 2, 10, 21));
    expect((await from({ country: "HK", asn: 4760, latitude: "22.50000", longitude: "114.00000" })).status).toBe(200);
    vi.setSystemTime(Date.UTC(2026, 10, 2, 10, 22));
    expect((await call("DELETE", `/auth/sessions/${other.id}`, sessionCookie(caller.token))).status).toBe(200);
    const db = await d1OfUser(userId);
    await db.prepare("UPDATE session_events SET admin_key_id = 'key-1' WHERE session_id = ?").bind(other.id).run();

    const response = await call("GET", "/auth/events", sessionCookie(caller.token));
    expect(response.status).toBe(200);
    expect(response.headers.get("Content-Type")).toBe("application/json");
    const { results } = await db
      .prepare("SELECT * FROM session_events WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT 100")
      .bind(userId)
      .all<EventRow>();
    expect(results.map((row) => row.type).sort()).toEqual(
      ["context_changed", "created", "created", "created", "deleted"].sort(),
    );
    expect(await response.text()).toBe(JSON.stringify({ events: results.map(eventRenderedBefore) }));
    vi.useRealTimers();
  });
});
