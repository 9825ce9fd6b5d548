import type { DeviceType } from "./device.ts";
import type { SupportActor } from "./support.ts";
import type { UpstreamSignInView } from "./upstreams/sign-in.ts";

/**
 * JSON text of a `T`, as SQLite wrote it: handed on as it is, parsed only where an object is
 * needed (the RPC).
 */
export type JsonText<T> = string & { readonly [json]: T };
declare const json: unique symbol;

/** The `T` that JSON text holds. */
export function parsedText<T>(text: JsonText<T>): T {
  return JSON.parse(text) as T;
}

/** A listed session: GET /auth/sessions and SessionService.listUserSessions, written by src/db/session-view.ts. */
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

/** What makes a listed session's name (`SessionView.name`), each word once: the list's SQL and `sessionName` are made of them. */
export const SESSION_NAME = {
  support: "Support access by ",
  unknownBrowser: "Unknown browser",
  os: " on ",
  ip: " · ",
} as const;

/** The columns a session's name is made of. */
export interface NamedSession {
  browser: string | null;
  os: string | null;
  ipAddress: string | null;
  supportAgent: string | null;
}

/**
 * A session's name, `Chrome 131 on macOS · 203.0.113.7` (an OS and an IP only when not empty),
 * `Support access by <agent>` on support access: src/db/session-view.ts `sessionNameOf` writes
 * the same in SQL (test/device.test.ts holds them together).
 */
export function sessionName({ browser, os, ipAddress, supportAgent }: NamedSession): string {
  if (supportAgent !== null) return SESSION_NAME.support + supportAgent;
  return (
    (browser ?? SESSION_NAME.unknownBrowser) +
    (os ? SESSION_NAME.os + os : "") +
    (ipAddress ? SESSION_NAME.ip + ipAddress : "")
  );
}

/** `SessionView.name` as the OpenAPI document describes it. */
export const SESSION_NAME_RULE = `Browser and OS parsed from the user agent (\`${SESSION_NAME.unknownBrowser}\` when it says nothing useful), then \`${SESSION_NAME.ip}\` and the IP when known; \`${sessionName({ browser: null, os: null, ipAddress: null, supportAgent: "<agent>" })}\` for support access (see \`actor\`).`;

/** A support session's actor, from its agent and reason columns; undefined on the user's own. */
export function supportActor(row: {
  supportAgent: string | null;
  supportReason: string | null;
}): SupportActor | undefined {
  return row.supportAgent === null ? undefined : { sub: row.supportAgent, reason: row.supportReason ?? "" };
}

/** A session as a backend sees it: as the user's list shows it, and the upstream sign-in behind it. */
export type BackendSessionView = SessionView & {
  upstream?: UpstreamSignInView;
  /** The organization the session was created in; null: outside any. */
  organization: string | null;
};
