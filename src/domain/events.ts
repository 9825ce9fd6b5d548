// The one list of event types: the type, the column enum and the OpenAPI document derive from it.
export const EVENT_TYPES = [
  "created",
  "logout",
  "deleted",
  "logout_all",
  "logout_others",
  // Ended by the rest of the system (SessionService.endSession / endUserSessions), with a reason.
  "ended",
  // Ended to keep the user within SESSION_MAX_PER_USER when a new session was issued.
  "evicted",
  // The user authenticated again (SessionService.reauthenticate): same session, new token.
  "reauthenticated",
  // The session was used from another device or network than last seen (SESSION_CONTEXT_DEVICE,
  // SESSION_CONTEXT_NETWORK = log or hold); an `end` policy logs `ended` instead.
  "context_changed",
  // The browser bound the session to a key it holds (POST /auth/dbsc/registration).
  "device_bound",
  // Ended by an inbound Security Event Token of an upstream (POST /ssf/inbound); the
  // reason is `<upstream name>:<event>`, the name SSF_UPSTREAMS gives the issuer.
  "ended_by_upstream",
  // Held until the user signs in again, as SESSION_CONTEXT_* = hold does, by an upstream's
  // CAEP event (its `events` action `hold`); the reason is `<upstream name>:<event>`.
  "held_by_upstream",
  // An upstream's CAEP event about the session, only logged (its `events` action `log`, or a
  // change that is no worse); the reason is `<upstream name>:<event>`.
  "signaled_by_upstream",
  // Held until the user signs in again, as SESSION_CONTEXT_* = hold does, by an admin's call
  // holding every session of an organization (src/services/organizations/sessions.ts); the
  // reason is the caller's.
  "held",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** GET /auth/events answers at most this many, newest first. */
export const EVENTS_LISTED = 100;
