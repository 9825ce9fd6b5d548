// The security log's words: what each event of GET /auth/events is, and why, in plain words.
// Type-only imports of the service's own lists: a new event type, reason or context policy
// without words here fails the typecheck, and nothing of the service is bundled.
import type { ContextPolicy } from "../../../src/domain/client-context.ts";
import type { EventType } from "../../../src/domain/events.ts";
import type { SERVICE_REASONS } from "../../../src/domain/reason.ts";
import type { KNOWN_REASONS } from "../../../src/services/user-sessions.ts";

/** The reasons the service itself gives (a context its policy ends, a report of a stranger's sign-in, a relink). */
type ServiceReason = (typeof SERVICE_REASONS)[keyof typeof SERVICE_REASONS];
/** Why a session ended (`ended`): the reasons a product gives, and the service's own. */
type EndedReason = (typeof KNOWN_REASONS)[number] | ServiceReason;
/** A context change's reason: the policy that applied (`ignore` logs nothing, `end` logs `ended`). */
type HeldOrLogged = Exclude<ContextPolicy, "ignore" | "end">;
/** What a hold's reason said in the events logged before the service's one list of actions. */
type FormerHold = "step-up";

export const WORDS = {
  events: {
    created: "Signed in",
    logout: "Signed out",
    deleted: "Signed out from another device",
    logout_all: "Signed out everywhere",
    logout_others: "Signed out with all other devices",
    ended: "Ended",
    evicted: "Ended: too many devices signed in",
    reauthenticated: "Signed in again",
    context_changed: "Used from another browser, network or place",
    device_bound: "Bound to its browser's key",
    ended_by_upstream: "Ended by your identity provider",
    held_by_upstream: "Held by your identity provider until you sign in again",
    signaled_by_upstream: "Noted from your identity provider",
    held: "Held by an administrator until you sign in again",
  } satisfies Record<EventType, string>,
  /** Said after a `created` event's words when no recent session of the user had its browser, OS and country. */
  newDevice: "from a new device",
  /** Per event type, its reasons; a reason not listed (a product's own, an upstream's `name:event`) is shown as given. */
  reasons: {
    ended: {
      password_changed: "the password was changed",
      account_disabled: "the account was disabled",
      admin: "an administrator ended it",
      context_changed: "it was used from another browser, network, or a place too far to travel to in time",
      reported_by_user: "you reported it wasn't you",
      upstream_relinked: "your company sign-in was used to sign in to another account",
    } satisfies Record<EndedReason, string>,
    context_changed: {
      log: "noted",
      hold: "held until you sign in again",
      "step-up": "held until you sign in again",
    } satisfies Record<HeldOrLogged | FormerHold, string>,
    reauthenticated: { hold: "the hold is lifted", "step-up": "the hold is lifted" } satisfies Record<
      Extract<HeldOrLogged, "hold"> | FormerHold,
      string
    >,
  },
  /** Who ended a session when no session did, by the service's reason; any other: the service. */
  endedBy: {
    context_changed: "the service",
    reported_by_user: "you, from the new-sign-in message",
    upstream_relinked: "the sign-in to the other account",
  } satisfies Record<ServiceReason, string>,
};
