import {
  AUTH_ERRORS,
  CHALLENGE,
  CROSS_SITE_OR_SUPPORT,
  error,
  HELD,
  METHOD_NOT_ALLOWED,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";

/** The OpenAPI document's part (src/http/openapi.ts) for device-binding.ts: the device-binding endpoints. */
export const deviceBindingPaths = {
  "/auth/dbsc/registration": {
    post: {
      operationId: "registerDeviceBinding",
      summary: "Binds the session to the browser's key (DBSC registration; the browser calls it, not a page)",
      description:
        "Called by a DBSC browser after a login response carrying `Secure-Session-Registration` (SessionService.create with `deviceBound: true`). `Secure-Session-Response` is the browser's proof: a JWT with `typ` `dbsc+jwt`, ES256 or RS256, its public key in the `jwk` header, and `jti` the challenge the login issued. From then on the session's token proves it only together with the live bound cookie. One D1 round trip; logged `device_bound`.",
      security: [{ sessionCookie: [] }],
      parameters: [ref("parameters/SecureSessionResponse")],
      responses: {
        "200": ok(
          "Bound: the session instructions and the next challenge. The bound cookie is the one the login response set (`boundCookie` of SessionService.create); the browser renews it at refresh.",
          ref("schemas/DeviceSessionInstructions"),
          { "Secure-Session-Challenge": ref("headers/SecureSessionChallenge") },
        ),
        "400": error(
          "The proof is missing or malformed, its signature does not verify with its key, or its `jti` is not the challenge this session was issued (or that challenge was already used). Nothing changed.",
          ["device_proof_invalid"],
        ),
        "401": error(
          `No session cookie (token_required), or one that is malformed, unknown, expired or revoked (invalid_token). ${HELD}`,
          ["token_required", "invalid_token", "reauthentication_required"],
          CHALLENGE,
        ),
        "409": error("The session is already bound to a key; nothing changed.", ["device_already_bound"]),
        ...CROSS_SITE_OR_SUPPORT,
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
  "/auth/dbsc/refresh": {
    post: {
      operationId: "refreshDeviceBinding",
      summary: "Renews a device-bound session's bound cookie against a fresh proof (DBSC refresh)",
      description:
        "Called by the browser whenever the bound cookie is missing. Without a proof, or with one over a stale challenge or signed by another key: 403 with a new challenge. With a proof by the session's key over its current challenge: a new bound cookie; the challenge is then used up. Not activity: `last_active_at` and the expiry do not change. One D1 round trip.",
      security: [{ sessionCookie: [] }],
      parameters: [ref("parameters/SecSecureSessionId"), ref("parameters/SecureSessionResponse")],
      responses: {
        "200": ok(
          'Either the session instructions with a new bound cookie (and the next challenge), or `{"continue": false}`: the session ended, expired or idled out (both cookies cleared), or this browser\'s binding belongs to another or an unbound session (the bound cookie cleared). The browser then stops refreshing.',
          { oneOf: [ref("schemas/DeviceSessionInstructions"), ref("schemas/DeviceSessionEnded")] },
          {
            "Set-Cookie": ref("headers/BoundCookie"),
            "Secure-Session-Challenge": ref("headers/NextChallenge"),
          },
        ),
        "400": error("No `Sec-Secure-Session-Id`: not a browser's refresh.", ["device_proof_invalid"]),
        "403": error(
          "Prove possession: sign the challenge in `Secure-Session-Challenge` with the session's key. Nothing else changed.",
          ["device_proof_required"],
          { "Secure-Session-Challenge": ref("headers/SecureSessionChallenge") },
        ),
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;
