import { InvalidInput } from "./invalid-input.ts";
import { parseDevice } from "./user-agent.ts";

// Where a session is used from, and what the service does when that changes: session context
// checks for browsers without device binding (DBSC), so that a copied cookie fails elsewhere.
// The rules themselves run in SQL, in each operation's one batch (src/db/client-context.ts):
//   - the device changed: the browser family or the OS differs from the last seen (a missing
//     User-Agent is what it parses to, no browser and no OS: stripping it changes the device),
//     but for Apple's Safari, which on an iPad (by default) or an iPhone (on request) asks for
//     desktop sites as Safari on macOS: the two are one device;
//   - the network changed: the ASN and the country both differ from the last seen, all four
//     known (mobile networks change addresses and ASNs within a country, travel changes the country).
// A call whose context is unknown (an RPC call without one) is not checked.

/** The one list of policies: the type, the settings' parsing and the docs derive from it. */
export const CONTEXT_POLICIES = ["allow", "log", "step-up", "end"] as const;
export type ContextPolicy = (typeof CONTEXT_POLICIES)[number];

/** What the service does per kind of change (SESSION_CONTEXT_DEVICE, SESSION_CONTEXT_NETWORK). */
export interface ContextPolicies {
  device: ContextPolicy;
  network: ContextPolicy;
}

/** Defaults measured on the journeys and thefts of test/context-trace.test.ts (BENCHMARKS.md, Session context). */
export const DEFAULT_CONTEXT_POLICIES: ContextPolicies = { device: "step-up", network: "log" };

/**
 * A call's context as compared: browser family (no version: browsers update themselves) and
 * OS, "" when the User-Agent names none; country (ISO 3166-1 alpha-2) and ASN, null when unknown.
 */
export interface ClientContext {
  browser: string;
  os: string;
  country: string | null;
  asn: number | null;
}

/** What a `context_changed` event records: the session's last seen context and the new one. */
export interface ContextChange {
  before: { browser: string | null; os: string | null; country: string | null; asn: number | null };
  after: { browser: string | null; os: string | null; country: string | null; asn: number | null };
}

/** What a login flow passes for the request it serves: its User-Agent and Cloudflare's `request.cf` country and ASN. */
export interface ContextInput {
  userAgent?: string | null;
  country?: string | null;
  asn?: number | null;
}

/** Safari on iOS and iPadOS, as itself and as it asks for desktop sites. */
const APPLE_SAFARI: readonly (readonly [browser: string, os: string])[] = [
  ["Mobile Safari", "iOS"],
  ["Safari", "macOS"],
];

/** The browser families and OSes, in pairs, that are the caller's device: itself, or both faces of Apple's Safari. */
export function sameDevice({ browser, os }: ClientContext): readonly (readonly [browser: string, os: string])[] {
  return APPLE_SAFARI.some(([b, o]) => b === browser && o === os) ? APPLE_SAFARI : [[browser, os]];
}

const COUNTRY = /^[A-Z0-9]{2}$/;

/** A country code as Cloudflare gives it, or null. */
export function countryOf(value: unknown): string | null {
  return typeof value === "string" && COUNTRY.test(value) ? value : null;
}

/** An ASN (a 32-bit unsigned number), or null. */
export function asnOf(value: unknown): number | null {
  return Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= 0xffffffff
    ? (value as number)
    : null;
}

/** A call's context from what its door knows: anything not of the expected form counts as unknown. */
export function clientContext(userAgent: unknown, country: unknown, asn: unknown): ClientContext {
  const device = parseDevice(typeof userAgent === "string" ? userAgent : "");
  return {
    browser: device.browser?.replace(/ \d+$/, "") ?? "",
    os: device.os ?? "",
    country: countryOf(country),
    asn: asnOf(asn),
  };
}

/** The context a login flow passed on (RPC, admin API), if any; anything but an object is InvalidInput. */
export function checkContextInput(context: unknown): ClientContext | null {
  if (context === undefined) return null;
  if (typeof context !== "object" || context === null)
    throw new InvalidInput("context must be an object of userAgent, country and asn");
  const { userAgent, country, asn } = context as ContextInput;
  return clientContext(userAgent, country, asn);
}
