// How a session's token travels, said by the login flow at issue: in the session cookie only
// (a browser), as a Bearer token only (an app, a backend, a CLI), or both. A browser's HttpOnly
// cookie is then worth nothing outside a cookie: its value sent as Bearer proves nothing, as a
// device-bound session's never did. The context check (src/domain/client-context.ts) judges only
// a browser's session used through its cookie; a Bearer call is an app's, from wherever it runs.
// A session issued without saying keeps the contract from before the check: either carrier, never judged.

import { InvalidInput } from "./invalid-input.ts";

/** The one list of what may carry a session's token: the type, the schema and the docs derive from it. */
export const SESSION_CARRIERS = ["cookie", "bearer", "both"] as const;
export type SessionCarrier = (typeof SESSION_CARRIERS)[number];

/** What carried the token of one call; null: a caller that does not say (an RPC call without `carrier`). */
export type TokenCarrier = "cookie" | "bearer" | null;

/** A session carrier from a login flow's input: undefined or null when it said none; anything else is InvalidInput. */
export function checkSessionCarrier(carrier: unknown): SessionCarrier | null {
  if (carrier === undefined || carrier === null) return null;
  if (!(SESSION_CARRIERS as readonly unknown[]).includes(carrier))
    throw new InvalidInput(`carrier must be one of ${SESSION_CARRIERS.map((c) => `"${c}"`).join(", ")}`);
  return carrier as SessionCarrier;
}

/** A call's carrier from an RPC caller's options: "cookie", "bearer", or omitted. */
export function checkTokenCarrier(carrier: unknown): TokenCarrier {
  if (carrier === undefined || carrier === null) return null;
  if (carrier !== "cookie" && carrier !== "bearer") throw new InvalidInput('carrier must be "cookie" or "bearer"');
  return carrier;
}
