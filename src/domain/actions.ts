// What the service does when something about a session changes: a context check's policy
// (SESSION_CONTEXT_*) and an identity provider's event (SSF_UPSTREAMS `events`) choose from the
// one list, so the same word means the same thing in both settings:
//   - `ignore`: nothing is done or logged;
//   - `log`: the security log records it;
//   - `hold`: every use but a sign-out is refused with RFC 9470's challenge until the user signs
//     in again (`reauthenticate`);
//   - `end`: the session ends.

/** The one list: the types, both settings' parsing and the documents derive from it. */
export const ACTIONS = ["ignore", "log", "hold", "end"] as const;
export type Action = (typeof ACTIONS)[number];

/** The action `value` names; null when it names none. */
export function actionNamed(value: unknown): Action | null {
  return ACTIONS.find((action) => action === value) ?? null;
}

/** Spellings SESSION_CONTEXT_* took before the one list; still read, so no deployment's settings break. */
const FORMER_SPELLINGS: Readonly<Record<string, Action>> = { allow: "ignore", "step-up": "hold" };

/** The action a SESSION_CONTEXT_* value names, its former spelling included; null when it names none. */
export function policyNamed(value: string): Action | null {
  return actionNamed(value) ?? FORMER_SPELLINGS[value] ?? null;
}

/**
 * Whether a security-log reason says a hold (a `context_changed` that held, a `reauthenticated`
 * that lifted one): `hold`, or `step-up` in the events logged before the one list, which the
 * outbox may still be sending.
 */
export function isHoldReason(reason: string | null): boolean {
  return reason === "hold" || reason === "step-up";
}
