// Why an operation by a session's token did nothing: the one vocabulary every service answers
// with, and each door turns into its own answer (src/http/refusals.ts for the HTTP API).
export const REFUSALS = [
  // The token proves no live session (unknown, ended, expired, idle, or without its bound cookie).
  "not_live",
  // Held by a context change, or too long since the last sign-in to end another session (RFC 9470).
  "step-up",
  // Support access asked for what only the user may do (src/domain/support.ts).
  "support",
  // No session id was given to delete.
  "id_required",
  // The id names no live session of the caller's user.
  "not_yours",
  // Device binding: the session is bound already, or the proof is not over its challenge.
  "already_bound",
  "wrong_challenge",
] as const;
export type Refusal = (typeof REFUSALS)[number];

export function isRefusal(value: unknown): value is Refusal {
  return typeof value === "string" && (REFUSALS as readonly string[]).includes(value);
}
