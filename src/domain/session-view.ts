import { type DeviceType, sessionName } from "./device.ts";
import { type SupportActor, supportSessionName } from "./support.ts";

/**
 * What the view reads of a listed session. The database's list statements return their rows
 * as this type, so TypeScript holds the tables (src/db/schema.ts) and the view together.
 */
export interface ListedSession {
  id: string;
  ipAddress: string | null;
  userAgent: string;
  browser: string | null;
  os: string | null;
  deviceType: DeviceType;
  country: string | null;
  city: string | null;
  createdAt: Date;
  expiresAt: Date;
  lastActiveAt: Date;
  dbscKeyThumbprint: string | null;
  seenBrowser: string | null;
  seenOs: string | null;
  seenCountry: string | null;
  seenAsn: number | null;
  supportAgent: string | null;
  supportReason: string | null;
}

export interface SessionView {
  id: string;
  name: string;
  ip_address: string;
  user_agent: string;
  created_at: string;
  expires_at: string;
  // Beyond the specified fields; only added, never changing them.
  last_active_at: string;
  location: string | null;
  device: { browser: string | null; os: string | null; type: DeviceType };
  /** Present (true) only on a session bound to its browser's key (DBSC). */
  device_bound?: true;
  /**
   * Where the session's cookie was last used from (a session not issued for the cookie: where it
   * signed in): browser family, OS, country and network (ASN), each null when unknown; null for a
   * session not used since these were recorded.
   */
  last_seen: { browser: string | null; os: string | null; country: string | null; asn: number | null } | null;
  /**
   * Present only on support access (src/domain/support.ts): who acts on the user's behalf
   * (RFC 8693 `act.sub`) and why; the session ends at `expires_at`, never later.
   */
  actor?: SupportActor;
}

/** A support session's actor, from its agent and reason columns; undefined on the user's own. */
export function supportActor(row: {
  supportAgent: string | null;
  supportReason: string | null;
}): SupportActor | undefined {
  return row.supportAgent === null ? undefined : { sub: row.supportAgent, reason: row.supportReason ?? "" };
}

/** What a listed session shows: GET /auth/sessions and SessionService.listUserSessions. */
export function sessionView(row: ListedSession): SessionView {
  const actor = supportActor(row);
  return {
    id: row.id,
    name: actor ? supportSessionName(actor.sub) : sessionName(row, row.ipAddress),
    ip_address: row.ipAddress ?? "",
    user_agent: row.userAgent,
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt.toISOString(),
    last_active_at: row.lastActiveAt.toISOString(),
    location: [row.city, row.country].filter(Boolean).join(", ") || null,
    device: { browser: row.browser, os: row.os, type: row.deviceType },
    // Absent rather than false, so that a list of unbound sessions reads exactly as before binding existed.
    ...(row.dbscKeyThumbprint === null ? {} : { device_bound: true as const }),
    last_seen:
      row.seenBrowser === null
        ? null
        : { browser: row.seenBrowser || null, os: row.seenOs || null, country: row.seenCountry, asn: row.seenAsn },
    ...(actor ? { actor } : {}),
  };
}
