import { ASSURANCE_LEVELS, AUTH_FACTORS } from "../../domain/auth-factors.ts";
import { MAX_SESSION_DATA_BYTES } from "../../domain/session-data.ts";
import { MAX_SUPPORT_REASON_LENGTH } from "../../domain/support.ts";
import { MAX_USER_ID_LENGTH } from "../../domain/user-id.ts";
import {
  AUTH_ERRORS,
  BEARER_OR_COOKIE,
  CHALLENGE,
  CROSS_SITE,
  error,
  HELD,
  METHOD_NOT_ALLOWED,
  NO_TOKEN,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";
import { UPSTREAM_SIGN_IN } from "../upstreams/routes.openapi.ts";

/** The OpenAPI document's part (src/http/openapi.ts) for whoami.ts: GET /auth/whoami. */
export const whoamiPaths = {
  "/auth/whoami": {
    get: {
      operationId: "whoami",
      summary: "Who the caller's session is: the user, the session, how and when it authenticated",
      description:
        "For a backend on any stack: pass on the request's `Authorization` header or its session cookie (with its `Cookie` header whole, for a device-bound session's bound cookie). The same credentials and rules as every /auth/ operation; one database round trip, never cached: a session that ended anywhere is refused by the very next call.",
      security: BEARER_OR_COOKIE,
      parameters: [
        {
          name: "max_age",
          in: "query",
          required: false,
          description:
            "Seconds: adds `fresh`, whether `authenticated_at` is at most this old (as OIDC's `max_age`). A whole number, 0 or more, given once; anything else is 400 invalid_max_age, before the session is looked up (but after the credential's form: no credential, or a malformed one, is the 401 first).",
          schema: { type: "integer", minimum: 0, maximum: 9_999_999_999 },
        },
      ],
      responses: {
        "200": ok("The caller's live session.", ref("schemas/Whoami")),
        "400": error("`max_age` is not one whole number of seconds, 0 or more.", ["invalid_max_age"]),
        "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
        ...CROSS_SITE,
        ...RATE_LIMITED,
        ...AUTH_ERRORS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;

/** The answer's schema, a component so that generated clients name its type. */
export const whoamiSchema = {
  type: "object",
  required: ["session_id", "user_id", "expires_at", "authenticated_at", "amr", "assurance_level", "device_bound"],
  properties: {
    session_id: ref("schemas/SessionId"),
    user_id: { type: "string", maxLength: MAX_USER_ID_LENGTH },
    expires_at: ref("schemas/Timestamp"),
    authenticated_at: {
      ...ref("schemas/Timestamp"),
      description: "The latest proof of identity; the sign-in itself when the login flow gave no factors.",
    },
    amr: {
      type: "array",
      items: { enum: [...AUTH_FACTORS] },
      description:
        "The factors proved on this session (RFC 8176 methods), oldest proof first; [] when none were given.",
    },
    assurance_level: {
      enum: [...ASSURANCE_LEVELS, null],
      description: "NIST SP 800-63B authenticator assurance level, when the login flow gave one.",
    },
    device_bound: {
      type: "boolean",
      description: "Bound to its browser's key (DBSC): its token works only beside the live bound cookie.",
    },
    fresh: {
      type: "boolean",
      description: "Only with `max_age`: `authenticated_at` is at most that old. Never true for support access.",
    },
    actor: {
      type: "object",
      description:
        "Present only on support access: the agent acting on the user's behalf (RFC 8693 `act.sub`), and why.",
      required: ["sub", "reason"],
      properties: {
        sub: { type: "string", maxLength: MAX_USER_ID_LENGTH },
        reason: { type: "string", maxLength: MAX_SUPPORT_REASON_LENGTH },
      },
      additionalProperties: false,
    },
    data: {
      type: "object",
      minProperties: 1,
      additionalProperties: true,
      description: `Present only when the session has application data: the JSON object (at most ${MAX_SESSION_DATA_BYTES} bytes) the login flow set and the system last replaced or patched (RPC or admin API). Written by servers only, never by the session's holder.`,
    },
    upstream: UPSTREAM_SIGN_IN,
  },
  additionalProperties: false,
} as const;
