import type { Context } from "hono";
import { boundCookieName } from "../../domain/cookie-header.ts";
import {
  challengeHeader,
  fieldString,
  parseSessionIdentifier,
  sessionIdentifier,
  sessionInstructions,
  verifyDeviceProof,
} from "../../domain/device-binding.ts";
import type { PublicKey } from "../../domain/jws.ts";
import { refreshDevice, registerDevice } from "../../services/device-binding.ts";
import { clearBoundCookie, clearCarriedCookie, setBoundCookie } from "../cookie.ts";
import { readCookieCredential } from "../credentials.ts";
import { requireSessionCookie, type TokenEnv, type TokenVariables } from "../middleware/auth.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import {
  AUTH_ERRORS,
  CHALLENGE,
  CROSS_SITE_OR_SUPPORT,
  error,
  HELD,
  METHOD_NOT_ALLOWED,
  ok,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";
import { deviceProofRequired, invalidDeviceProof, refused } from "../refusals.ts";
import { AUTH, type Credential, declare } from "../route.ts";

const SESSION_COOKIE = [{ sessionCookie: [] }];

const invalidProof = () => {
  throw invalidDeviceProof();
};

// The two endpoints a DBSC browser calls on its own (src/domain/device-binding.ts): registration,
// right after a device-bound login (whose response set the first bound cookie), and refresh,
// whenever the bound cookie is missing. Both are authenticated by the session cookie alone
// (the bound cookie is what refresh renews), each is one D1 round trip, and neither counts as
// the user's activity.

/** The answer that keeps the browser's session going: instructions, the next challenge (and a new bound cookie). */
function bound<E extends ScopedEnv>(
  c: Context<E>,
  sessionId: string,
  key: PublicKey,
  next: string,
  secret: string | null,
) {
  const identifier = sessionIdentifier(sessionId, key);
  if (secret) setBoundCookie(c, secret);
  c.header("Secure-Session-Challenge", challengeHeader(next, identifier));
  return c.json(sessionInstructions(identifier, boundCookieName(c.var.scope.config.cookieName)));
}

/**
 * `continue: false`: the browser ends its session. The identifier is echoed: Chromium takes an
 * answer without one for a wrong session (it ends it all the same, but says so).
 */
function discontinue<E extends ScopedEnv>(c: Context<E>, identifier: string, clearSession: boolean) {
  if (clearSession) clearCarriedCookie(c);
  clearBoundCookie(c);
  return c.json({ session_identifier: identifier, continue: false });
}

/** Registration: the session cookie alone (`requireSessionCookie`), from the same site. */
const REGISTRATION: Credential<TokenEnv> = {
  security: SESSION_COOKIE,
  mount: AUTH,
  use: [requireSessionCookie],
  answers: { ...CROSS_SITE_OR_SUPPORT, ...RATE_LIMITED, ...AUTH_ERRORS },
  otherMethods: METHOD_NOT_ALLOWED,
};

/**
 * Refresh reads the cookie itself, since no cookie or a dead one ends the browser's session
 * rather than refusing, and sets the token once it has a live one, for the request log.
 */
const REFRESH: Credential<ScopedEnv & { Variables: Partial<TokenVariables> }> = {
  security: SESSION_COOKIE,
  mount: AUTH,
  use: [],
  answers: AUTH_ERRORS,
  otherMethods: METHOD_NOT_ALLOWED,
};

// The document's `parameters/SecureSessionResponse` and `parameters/SecSecureSessionId`, the
// components the members below refer to.
export const PROOF_PARAMETER = {
  name: "Secure-Session-Response",
  in: "header",
  required: false,
  description: "The DBSC proof: a compact JWS, as a structured-field string (quoted or not).",
  schema: { type: "string" },
};
export const IDENTIFIER_PARAMETER = {
  name: "Sec-Secure-Session-Id",
  in: "header",
  required: true,
  description: "The `session_identifier` the registration gave, as a structured-field string.",
  schema: { type: "string" },
};

/** The browser's proof, as sent: a structured-field string, or null. */
const PROOF = {
  doc: ref("parameters/SecureSessionResponse"),
  read: (c: Context) => fieldString(c.req.header("Secure-Session-Response")),
};

export const DEVICE_BINDING_ROUTES = [
  declare({
    method: "post",
    path: "/auth/dbsc/registration",
    credential: REGISTRATION,
    operationId: "registerDeviceBinding",
    summary: "Binds the session to the browser's key (DBSC registration; the browser calls it, not a page)",
    description:
      "Called by a DBSC browser after a login response carrying `Secure-Session-Registration` (SessionService.create with `deviceBound: true`). `Secure-Session-Response` is the browser's proof: a JWT with `typ` `dbsc+jwt`, ES256 or RS256, its public key in the `jwk` header, and `jti` the challenge the login issued. From then on the session's token proves it only together with the live bound cookie. One D1 round trip; logged `device_bound`.",
    parameters: {
      proof: { ...PROOF, read: async (c) => (await verifyDeviceProof(PROOF.read(c), null)) ?? invalidProof() },
    },
    answers: {
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
    },
    handler: async (c, { proof }) => {
      const credential = c.var.token;
      const { outcome, nextChallenge } = await registerDevice(c.var.scope, credential, proof);
      if (outcome !== "bound") throw refused(c, outcome);
      return bound(c, credential.proof.id, proof.key, nextChallenge, null);
    },
  }),
  declare({
    method: "post",
    path: "/auth/dbsc/refresh",
    credential: REFRESH,
    operationId: "refreshDeviceBinding",
    summary: "Renews a device-bound session's bound cookie against a fresh proof (DBSC refresh)",
    description:
      "Called by the browser whenever the bound cookie is missing. Without a proof, or with one over a stale challenge or signed by another key: 403 with a new challenge. With a proof by the session's key over its current challenge: a new bound cookie; the challenge is then used up. Not activity: `last_active_at` and the expiry do not change. One D1 round trip.",
    parameters: {
      // Only the browser's own refresh carries it (a page cannot set a Sec- header): no other
      // site can make this endpoint reveal whether its visitor is signed in.
      identifier: {
        doc: ref("parameters/SecSecureSessionId"),
        read: (c) => fieldString(c.req.header("Sec-Secure-Session-Id")) ?? invalidProof(),
      },
      // Verified once the session names the key.
      proofText: PROOF,
    },
    answers: {
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
    },
    handler: async (c, { identifier, proofText }) => {
      const credential = await readCookieCredential(c);
      if (credential.kind !== "token") return discontinue(c, identifier, true);
      const named = parseSessionIdentifier(identifier);
      // Another session's binding (this browser has since signed in again): end that one only.
      if (!named || named.sessionId !== credential.proof.id) return discontinue(c, identifier, false);
      const proof = await verifyDeviceProof(proofText, named.key);
      const { outcome, nextChallenge, secret } = await refreshDevice(c.var.scope, credential, {
        challenge: proof?.challenge ?? null,
        key: named.key,
      });
      if (outcome === "not_live") return discontinue(c, identifier, true);
      if (outcome === "not_bound") return discontinue(c, identifier, false);
      c.set("token", credential);
      if (outcome === "refreshed") return bound(c, credential.proof.id, named.key, nextChallenge, secret);
      throw deviceProofRequired(challengeHeader(nextChallenge, identifier));
    },
  }),
] as const;
