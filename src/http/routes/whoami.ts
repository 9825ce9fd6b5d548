import { ASSURANCE_LEVELS, AUTH_FACTORS, type AuthFactor, isMaxAge } from "../../domain/auth-factors.ts";
import { type CallerView, callerView } from "../../domain/caller-view.ts";
import { isRefusal } from "../../domain/refusal.ts";
import { MAX_SESSION_DATA_BYTES, type SessionData } from "../../domain/session-data.ts";
import { MAX_SUPPORT_REASON_LENGTH, type SupportActor } from "../../domain/support.ts";
import type { UpstreamSignInView } from "../../domain/upstreams/sign-in.ts";
import { MAX_USER_ID_LENGTH } from "../../domain/user-id.ts";
import { ownSession } from "../../services/own-sessions.ts";
import { error, MEMBER_OF, ok, ref } from "../openapi-parts.ts";
import { invalidMaxAge, refused } from "../refusals.ts";
import { declare, TOKEN } from "../route.ts";
import { UPSTREAM_SIGN_IN } from "../upstreams/routes.ts";

/** Who the caller's session is, for a backend on any stack: GET /auth/whoami. */
export interface WhoamiView {
  session_id: string;
  user_id: string;
  expires_at: string;
  /** The latest proof of identity (the sign-in itself when the login flow gave no factors). */
  authenticated_at: string;
  /** RFC 8176 methods proved on this session, oldest proof first. */
  amr: AuthFactor[];
  /** NIST SP 800-63B AAL, when the login flow gave one. */
  assurance_level: number | null;
  /** The organization the session was created in; null: outside any. */
  organization: string | null;
  device_bound: boolean;
  /** With `max_age`: `authenticated_at` is at most that many seconds ago; never for support access. */
  fresh?: boolean;
  /** Present only on support access: the agent acting on the user's behalf, and why. */
  actor?: SupportActor;
  /** Present only when the session has application data (src/domain/session-data.ts). */
  data?: SessionData;
  /** Present only when the login flow signed the user in through an upstream identity provider. */
  upstream?: UpstreamSignInView;
}

/**
 * The caller's view (src/domain/caller-view.ts) in the contract's names: the factors as RFC 8176
 * `amr`, `device_bound` always said. Never `reauthenticationRequired`: a held session is refused.
 */
export function whoamiView(view: CallerView): WhoamiView {
  return {
    session_id: view.sessionId,
    user_id: view.userId,
    expires_at: view.expiresAt,
    authenticated_at: view.authenticatedAt,
    amr: view.factors.map((proof) => proof.factor),
    assurance_level: view.assuranceLevel,
    organization: view.organization,
    device_bound: view.deviceBound === true,
    ...(view.fresh === undefined ? {} : { fresh: view.fresh }),
    ...(view.actor ? { actor: view.actor } : {}),
    ...(view.data ? { data: view.data } : {}),
    ...(view.upstream ? { upstream: view.upstream } : {}),
  };
}

/** `max_age` from the query: absent, or once, a whole number of seconds. */
function maxAgeOf(values: string[] | undefined): number | null {
  if (values === undefined) return null;
  const [value] = values;
  const seconds = values.length === 1 && value !== undefined && /^\d{1,10}$/.test(value) ? Number(value) : Number.NaN;
  if (!isMaxAge(seconds)) throw invalidMaxAge();
  return seconds;
}

// Named after what a backend asks (Ory Kratos' `/sessions/whoami`), apart from `/auth/sessions`,
// whose answer is the user's device list. A read: never cached (no-store under /auth/), so a
// revocation is seen by the very next call, and it writes only the activity every request by
// token records when due.
export const WHOAMI_ROUTES = [
  declare({
    method: "get",
    path: "/auth/whoami",
    credential: TOKEN,
    operationId: "whoami",
    summary: "Who the caller's session is: the user, the session, how and when it authenticated",
    description:
      "For a backend on any stack: pass on the request's `Authorization` header or its session cookie (with its `Cookie` header whole, for a device-bound session's bound cookie). The same credentials and rules as every /auth/ operation; one database round trip, never cached: a session that ended anywhere is refused by the very next call.",
    parameters: {
      maxAge: {
        doc: {
          name: "max_age",
          in: "query",
          required: false,
          description:
            "Seconds: adds `fresh`, whether `authenticated_at` is at most this old (as OIDC's `max_age`). A whole number, 0 or more, given once; anything else is 400 invalid_max_age, before the session is looked up (but after the credential's form: no credential, or a malformed one, is the 401 first).",
          schema: { type: "integer", minimum: 0, maximum: 9_999_999_999 },
        },
        // Before the round trip: a query it would refuse costs the database nothing.
        read: (c) => maxAgeOf(c.req.queries("max_age")),
      },
    },
    answers: {
      "200": ok("The caller's live session.", ref("schemas/Whoami")),
      "400": error("`max_age` is not one whole number of seconds, 0 or more.", ["invalid_max_age"]),
    },
    handler: async (c, { maxAge }) => {
      const { scope, token } = c.var;
      const caller = await ownSession(scope, token);
      if (isRefusal(caller)) throw refused(c, caller);
      return c.json(whoamiView(callerView(caller, scope.at, maxAge)));
    },
  }),
] as const;

/** The answer's schema, a component so that generated clients name its type. */
export const whoamiSchema = {
  type: "object",
  required: [
    "session_id",
    "user_id",
    "expires_at",
    "authenticated_at",
    "amr",
    "assurance_level",
    "organization",
    "device_bound",
  ],
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
    organization: MEMBER_OF,
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
