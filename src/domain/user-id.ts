// The one rule for a user id given by the rest of the system (the RPC, the operator commands,
// a Shared Signals subject). Opaque and exact: stored and matched as given, so " alice" or
// "alice\n" would silently be another user than "alice". Refused rather than trimmed: the
// caller has a bug to see.

export const MAX_USER_ID_LENGTH = 255;

export function isUserId(value: unknown): value is string {
  return (
    typeof value === "string" &&
    value !== "" &&
    value.trim() === value &&
    value.length <= MAX_USER_ID_LENGTH &&
    !/\p{Cc}/u.test(value)
  );
}
