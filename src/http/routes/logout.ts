import type { Context } from "hono";
import { isRefusal, Refused } from "../../domain/refusal.ts";
import { endAllOwnSessions, endOtherOwnSessions, endOwnSession, ownSession } from "../../services/own-sessions.ts";
import { clearCarriedCookie } from "../cookie.ts";
import { CHALLENGE, CLEARS_COOKIE, CROSS_SITE_OR_SUPPORT, error, HELD, message, ok, ref } from "../openapi-parts.ts";
import { invalidScope, refused } from "../refusals.ts";
import { declare, LOGOUT_TOKEN } from "../route.ts";

/** The document's `parameters/Scope`, the component SCOPE's `doc` refers to. */
export const SCOPE_PARAMETER = {
  name: "scope",
  in: "query",
  required: false,
  description:
    "`others`: end every session of the caller's user but the caller's own. Any other value: 400 invalid_scope once the token proved live (nothing ends; a carried cookie is cleared).",
  schema: { type: "string", enum: ["others"] },
};
/**
 * `scope`: omitted (every session) or `others`; any other value reads to its refusal, thrown once
 * the token proved live: a dead token is still the contract's 401 session_invalid.
 */
const SCOPE = {
  doc: ref("parameters/Scope"),
  read: (c: Context) => {
    const scope = c.req.query("scope");
    if (scope === undefined) return "all";
    return scope === "others" ? scope : invalidScope();
  },
};

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

// GET was withdrawn: a prefetch or an <img> could log a user out. It gets the app's 405.
// A logout clears a cookie the request carried whenever the token is dead, and only then.
export const LOGOUT_ROUTES = [
  declare({
    method: "post",
    path: "/auth/logout",
    credential: LOGOUT_TOKEN,
    operationId: "logout",
    summary: "Ends the session that makes the request",
    answers: {
      "200": ok(
        "Logged out. Clears the cookie when the request carried it.",
        message({ const: "Logged out" }),
        CLEARS_COOKIE,
      ),
      "400": error(
        "The token is malformed, unknown, expired or revoked. Clears a carried cookie.",
        ["session_invalid"],
        CLEARS_COOKIE,
      ),
      "401": error("No token at all.", ["token_required"], CHALLENGE),
    },
    handler: async (c) => {
      const ended = await endOwnSession(c.var.scope, c.var.token);
      clearCarriedCookie(c);
      if (ended === "not_live") throw refused(c, ended, "session_invalid_400");
      return c.json({ message: "Logged out" });
    },
  }),
  declare({
    method: "delete",
    path: "/auth/logout",
    credential: LOGOUT_TOKEN,
    operationId: "logoutAll",
    summary: "Ends every session of the caller's user, or with scope=others every other one",
    parameters: { scopeParameter: SCOPE },
    answers: {
      "200": ok(
        "Logged out. Clears a carried cookie, except with scope=others (the caller stays signed in).",
        message({
          anyOf: [
            { const: "Logged out of all sessions" },
            { pattern: "^Logged out of (1 other session|(0|[2-9]|[1-9][0-9]+) other sessions)$" },
          ],
        }),
        CLEARS_COOKIE,
      ),
      "400": error(
        "The token is malformed (session_invalid); or `scope` is neither omitted nor `others` (invalid_scope: checked once the token proved live, so a dead token still gets the 401 session_invalid; nothing ends). Either clears a carried cookie.",
        ["invalid_scope", "session_invalid"],
        CLEARS_COOKIE,
      ),
      "401": error(
        `No token at all (token_required); or a well-formed token that is unknown, expired or revoked, whatever the \`scope\` (session_invalid, clears a carried cookie); or, only with scope=others and SESSION_STEP_UP_MAX_AGE_SECONDS set, a live token whose last authentication is older than that (reauthentication_required: nothing ended, cookie kept, RFC 9470 challenge with max_age). ${HELD} Cookie kept; POST /auth/logout is never held back.`,
        ["token_required", "session_invalid", "reauthentication_required"],
        {
          ...CHALLENGE,
          ...CLEARS_COOKIE,
        },
      ),
      ...CROSS_SITE_OR_SUPPORT,
    },
    handler: async (c, { scopeParameter }) => {
      const { scope, token } = c.var;
      if (scopeParameter instanceof Refused) {
        // An addition may not change a specified answer: a dead token is still the contract's
        // 401 session_invalid, so the token is proven first (the one round trip); nothing ends.
        const state = await ownSession(scope, token);
        if (state === "step-up") throw refused(c, state);
        clearCarriedCookie(c);
        if (state === "not_live") throw refused(c, state, "session_invalid");
        throw scopeParameter;
      }
      const ended =
        scopeParameter === "others" ? await endOtherOwnSessions(scope, token) : await endAllOwnSessions(scope, token);
      if (ended === "not_live") clearCarriedCookie(c);
      // The caller stays signed in otherwise (a refusal, or the other sessions ended): its cookie stays.
      if (isRefusal(ended)) throw refused(c, ended, "session_invalid");
      if (scopeParameter === "others") return c.json({ message: `Logged out of ${plural(ended, "other session")}` });
      clearCarriedCookie(c);
      return c.json({ message: "Logged out of all sessions" });
    },
  }),
] as const;
