import { d1BindingOfFailure } from "../db/d1.ts";
import { logLine } from "../domain/log.ts";

// The log lines of failures, with nothing secret in them: an error nobody expected (a 500, an
// RPC call that threw one, a cron's job that failed), enough for an operator to tell a lock from
// a bug from a bad deploy; and an outbox send that failed, which the cron makes good.

/**
 * Anything token-, secret- or hash-like: a run of 16+ token characters with a digit or both
 * cases (tokens, session ids, SHA-256 hex), and quoted literals (bound values in SQL).
 * Words such as SQLITE_BUSY_SNAPSHOT or sessions_user_id_expires_at_idx stay readable.
 */
const SECRET_LIKE = /'[^']*'|"[^"]*"|[\w+/=.-]{16,}/g;
const MAX_MESSAGE = 300;

export function redact(text: string): string {
  return text
    .replace(SECRET_LIKE, (run) =>
      run.startsWith("'") || run.startsWith('"') || /\d/.test(run) || (/[a-z]/.test(run) && /[A-Z]/.test(run))
        ? "[redacted]"
        : run,
    )
    .slice(0, MAX_MESSAGE);
}

/** The innermost cause: Drizzle wraps a driver's error in one that quotes the SQL and its values. */
function rootOf(error: unknown): unknown {
  let at = error;
  while (at instanceof Error && at.cause instanceof Error) at = at.cause;
  return at;
}

const nameOf = (error: unknown) => (error instanceof Error ? error.name : typeof error);

/**
 * What an error says, with nothing secret: the innermost cause's class and message, redacted
 * (a bug's TypeError, not Drizzle's wrapper), and the D1 binding that failed.
 */
function described(error: unknown) {
  const root = rootOf(error);
  return {
    name: nameOf(root),
    message: redact(root instanceof Error ? root.message : String(root)),
    binding: d1BindingOfFailure(error),
  };
}

/** Where it happened: `{ method, route }` for HTTP, `{ rpc }` for SessionService, `{ cron }` for a cron's job. */
export type FailureSite = { method: string; route: string | null } | { rpc: string } | { cron: "delivery" | "purge" };

export function logFailure(error: unknown, site: FailureSite, requestId: string): void {
  const { name, message, binding } = described(error);
  logLine("error", "unhandled_error", { name, message, ...site, binding, request_id: requestId });
}

/**
 * An outbox send that failed, described as any failure: the events stay pending, and the cron
 * sends them again. A warning written through console.error, as this line has always been.
 */
export function logOutboxFailure(error: unknown): void {
  logLine("warn", "outbox_send_failed", described(error), "error");
}
