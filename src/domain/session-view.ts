import type { DeviceType } from "./device.ts";
import type { SupportActor } from "./support.ts";
import type { UpstreamSignInView } from "./upstream-sign-in.ts";

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

/** A support session's actor, from its agent and reason columns; undefined on the user's own. */
export function supportActor(row: {
  supportAgent: string | null;
  supportReason: string | null;
}): SupportActor | undefined {
  return row.supportAgent === null ? undefined : { sub: row.supportAgent, reason: row.supportReason ?? "" };
}

/** A session as a backend sees it: as the user's list shows it, and the upstream sign-in behind it. */
export type BackendSessionView = SessionView & { upstream?: UpstreamSignInView };
