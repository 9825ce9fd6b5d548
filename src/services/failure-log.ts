import { d1BindingOfFailure } from "../db/d1.ts";
import { ConfigError } from "../domain/config.ts";
import { BucketMoving, DatabaseUnavailable, UpstreamKeysUnavailable } from "../domain/errors.ts";
import { logLine } from "../domain/log.ts";

// The log lines of failures, with nothing secret in them, one per failure: what failed (the
// event), where (the entry point's site) and which request, the same whether it came through
// HTTP, the RPC or a cron; and an outbox send that failed, which the cron makes good. Enough for
// an operator to tell a lock from a bug from a bad deploy.

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

/**
 * The one line of a failure, written by its entry point (src/http/errors.ts's `writeError`, the
 * RPC's `run`, the crons), and by nothing else: a failure to retry (HTTP's 503) a line named for
 * it; a refused configuration `config_error`, its message whole (it names only the var and its
 * rule); anything else, a bug included, `unhandled_error`, described. Each ends with the site
 * and the request's id.
 */
export function logFailure(error: unknown, site: FailureSite, requestId: string): void {
  if (!firstLineOf(error)) return;
  const where: Record<string, string | null> = { ...site, request_id: requestId };
  if (error instanceof DatabaseUnavailable) logLine("warn", "database_unavailable", where);
  else if (error instanceof BucketMoving && error.unboundTarget === null) logLine("warn", "bucket_moving", where);
  // A move to a binding this worker lacks holds the bucket's users until one is deployed: an operator's error.
  else if (error instanceof BucketMoving)
    logLine("error", "move_target_unbound", { binding: error.unboundTarget, ...where });
  else if (error instanceof UpstreamKeysUnavailable) {
    const { upstream, why, failure } = error;
    logLine("warn", "upstream_keys_unavailable", { upstream, why, ...(failure === null ? {} : { failure }), ...where });
  } else if (error instanceof ConfigError) logLine("error", "config_error", { message: error.message, ...where });
  else {
    const { name, message, binding } = described(error);
    logLine("error", "unhandled_error", { name, message, ...site, binding, request_id: requestId });
  }
}

/** Errors whose line is written: one failure has one line, however many callers it reaches. */
const written = new WeakSet<object>();

function firstLineOf(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return true;
  if (written.has(error)) return false;
  written.add(error);
  return true;
}

/**
 * An outbox send that failed, described as any failure: the events stay pending, and the cron
 * sends them again. A warning written through console.error, as this line has always been.
 * `about`: what it held back (an organization's provider), named when known.
 */
export function logOutboxFailure(error: unknown, about: Record<string, string | null> = {}): void {
  if (!firstLineOf(error)) return;
  logLine("warn", "outbox_send_failed", { ...described(error), ...about }, "error");
}
