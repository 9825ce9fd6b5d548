import { STREAM_REQUEST_MESSAGES } from "../domain/ssf/streams.ts";

// Every error the API can answer, with its one message. Clients branch on `code`. The one
// list of error codes: the type and the OpenAPI document derive from it.
export const MESSAGES = {
  invalid_token: "The access token is missing, invalid or expired.",
  session_id_required: "A session id is required.",
  not_authorized: "You are not authorized to delete this session.",
  token_required: "No authentication token was provided.",
  session_invalid: "The session is invalid or has already ended.",
  cross_site_request: "Cross-site requests authenticated by cookie are not allowed.",
  method_not_allowed: "This method is not allowed on this path.",
  not_found: "No such endpoint.",
  invalid_scope: "The scope parameter must be omitted or be 'others'.",
  invalid_max_age: "The max_age parameter must be given at most once, as a whole number of seconds (0 or more).",
  rate_limited: "Too many failed authentication attempts. Retry later.",
  uri_too_long: "The request path is too long.",
  internal_error: "Something went wrong on our side. Please try again.",
  service_unavailable: "The service is busy or briefly unreachable. Retry after the Retry-After delay.",
  moving: "Your sessions are being moved to another database; nothing was changed. Retry after the Retry-After delay.",
  reauthentication_required:
    "Sign in again: your last sign-in is too old to end other sessions, or this session was used from another browser or network, or your identity provider asked you to sign in again.",
  device_proof_invalid:
    "The device-binding proof is missing, malformed, not signed by its key, or not over a challenge this session was given.",
  device_proof_required: "Sign the challenge in Secure-Session-Challenge with this session's device key.",
  device_already_bound: "This session is already bound to a device key.",
  // Thrown by the domain's checks of a stream request, which carry their answer.
  ...STREAM_REQUEST_MESSAGES,
  stream_id_required: "The stream_id query parameter is required.",
  stream_not_found: "No stream with this id belongs to this receiver.",
  stream_limit_reached: "This receiver has as many streams as it may; delete one first.",
  verification_too_frequent:
    "A verification of this stream was asked for too recently. Retry after the Retry-After delay.",
  body_too_large: "The request body is too large.",
  unsupported_media_type: "The request body must be sent as application/json.",
  invalid_input:
    "A path parameter, query parameter or body member breaks the rule this call holds it to; detail says which.",
  insufficient_scope: "This admin key does not have the scope this call requires.",
  provider_name_taken:
    "An identity provider of this name exists already (an organization's, or one of SSF_UPSTREAMS): choose another name.",
  provider_changed: "The identity provider was changed by another call meanwhile; nothing was written. Send it again.",
  session_not_found: "No live session matches: the token or id is unknown, or its session ended.",
  organization_not_found: "No organization has this id.",
  report_not_found: "No such report link.",
  report_used: "This report link was used already: that sign-in was ended then.",
  report_expired: "This report link has expired; sign in to review your devices.",
  session_ended: "That sign-in has already ended: there is nothing left to end.",
  support_session_refused:
    "A support session cannot do this: only the user ends their other sessions, and support access is never re-authenticated or bound to a device.",
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof MESSAGES;
