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
import { Hono } from "../hono.ts";
import { requireSessionCookie, type TokenVariables } from "../middleware/auth.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { deviceProofRequired, invalidDeviceProof, refused } from "../refusals.ts";

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

// Registration takes the session cookie alone (`requireSessionCookie`); refresh reads it itself,
// since no cookie or a dead one ends the browser's session rather than refusing, and sets the
// token once it has a live one, for the request log.
export const deviceBindingRoutes = new Hono<ScopedEnv & { Variables: Partial<TokenVariables> }>()
  .post("/registration", requireSessionCookie, async (c) => {
    const credential = c.var.token;
    const proof = await verifyDeviceProof(fieldString(c.req.header("Secure-Session-Response")), null);
    if (!proof) throw invalidDeviceProof();
    const { outcome, nextChallenge } = await registerDevice(c.var.scope, credential, proof);
    if (outcome !== "bound") throw refused(c, outcome);
    return bound(c, credential.proof.id, proof.key, nextChallenge, null);
  })
  .post("/refresh", async (c) => {
    // Only the browser's own refresh carries it (a page cannot set a Sec- header): no other
    // site can make this endpoint reveal whether its visitor is signed in.
    const identifier = fieldString(c.req.header("Sec-Secure-Session-Id"));
    if (identifier === null) throw invalidDeviceProof();
    const credential = await readCookieCredential(c);
    if (credential.kind !== "token") return discontinue(c, identifier, true);
    const named = parseSessionIdentifier(identifier);
    // Another session's binding (this browser has since signed in again): end that one only.
    if (!named || named.sessionId !== credential.proof.id) return discontinue(c, identifier, false);
    const proof = await verifyDeviceProof(fieldString(c.req.header("Secure-Session-Response")), named.key);
    const { outcome, nextChallenge, secret } = await refreshDevice(c.var.scope, credential, {
      challenge: proof?.challenge ?? null,
      key: named.key,
    });
    if (outcome === "not_live") return discontinue(c, identifier, true);
    if (outcome === "not_bound") return discontinue(c, identifier, false);
    c.set("token", credential);
    if (outcome === "refreshed") return bound(c, credential.proof.id, named.key, nextChallenge, secret);
    throw deviceProofRequired(challengeHeader(nextChallenge, identifier));
  });
