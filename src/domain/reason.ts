// The one rule for the reason the security log records with an ending: given by the rest of
// the system (SessionService, the operator's `session:end`), or an upstream's name and event
// (src/domain/upstreams/inbound.ts), or one of the service's own below.

export const MAX_REASON_LENGTH = 64;
// Printable ASCII, no leading or trailing space: safe to show in a log, a UI or a query.
const REASON = new RegExp(`^(?! )[\\x20-\\x7E]{1,${MAX_REASON_LENGTH}}(?<! )$`);

export function isReason(value: unknown): value is string {
  return typeof value === "string" && REASON.test(value);
}

/** The reasons the service itself gives an `ended` event; the demo's security log words each. */
export const SERVICE_REASONS = {
  /** The session context policy ended a session used from elsewhere (src/db/client-context.ts). */
  contextChanged: "context_changed",
  /** The user confirmed "this wasn't me" with the sign-in's report token (src/services/report.ts). */
  reportedByUser: "reported_by_user",
  /**
   * A sign-in linked the upstream's subject to another user, whose sessions signed in as that
   * subject end (src/services/upstreams/links.ts).
   */
  upstreamRelinked: "upstream_relinked",
} as const;

/** One of the service's own reasons: never taken from a caller, so the log's reason says who ended it. */
export function isServiceReason(reason: string): boolean {
  return (Object.values(SERVICE_REASONS) as string[]).includes(reason);
}
