// The one rule for a user id given by the rest of the system (the RPC, the operator commands,
// a Shared Signals subject). Opaque and exact: stored and matched as given, so " alice" or
// "alice\n" would silently be another user than "alice". Refused rather than trimmed: the
// caller has a bug to see. Nor "." or "..": in a URL path (the admin API's
// /admin/users/{userId}/…) such a segment is a dot segment, which URL parsing removes, even
// percent-encoded (%2E%2E), so no route could reach that user by its id.

export const MAX_USER_ID_LENGTH = 255;

/** The rule, as every refusal of a user id states it. */
export const USER_ID_RULE = `a non-empty string of at most ${MAX_USER_ID_LENGTH} characters, without leading or trailing whitespace or control characters, and not "." or ".."`;

export function isUserId(value: unknown): value is string {
  return (
    typeof value === "string" &&
    value !== "" &&
    value.trim() === value &&
    value.length <= MAX_USER_ID_LENGTH &&
    !/\p{Cc}/u.test(value) &&
    value !== "." &&
    value !== ".."
  );
}
