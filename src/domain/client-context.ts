import type { Action } from "./actions.ts";
import { type DeviceFace, faceOf } from "./device.ts";
import { InvalidInput } from "./invalid-input.ts";
import { parseDevice } from "./user-agent.ts";

// Where a session is used from, and what the service does when that changes: session context
// checks for browsers without device binding (DBSC), so that a copied cookie fails elsewhere.
// The rules themselves run in SQL, in each operation's one batch (src/db/client-context.ts):
//   - the device changed: the last seen is not the same device (src/domain/device.ts `facesOf`,
//     the new-device notice's rule too: browser family and OS, Safari's two faces one device; a
//     missing User-Agent is what it parses to, no browser and no OS: stripping it changes the device);
//   - the network changed: the ASN and the country both differ from the last seen, all four
//     known (mobile networks change addresses and ASNs within a country, travel changes the country);
//   - travel: the place (Cloudflare's latitude and longitude of the address) is farther from the
//     last seen than SESSION_TRAVEL_MIN_KM, and than SESSION_TRAVEL_MAX_KMH covers since: no
//     traveller gets there that fast, whatever the network (a thief on the victim's provider too).
// A call whose context is unknown (an RPC call without one) is not checked.

/** A policy is one of the actions (src/domain/actions.ts), as a provider's events' are. */
export type ContextPolicy = Action;

/** The one list of kinds of change, each set by its var SESSION_CONTEXT_<KIND>: the types and the config derive from it. */
export const CONTEXT_KINDS = ["device", "network", "travel"] as const;
export type ContextKind = (typeof CONTEXT_KINDS)[number];

/** What the service does per kind of change. */
export type ContextPolicies = Record<ContextKind, ContextPolicy>;

/**
 * Defaults measured on the journeys and thefts of test/context-trace.test.ts (BENCHMARKS.md,
 * Session context). Travel holds the session like a device change: the trace's only journeys it
 * disturbs are a VPN whose exit is on another continent, which looks exactly like a thief there.
 */
export const DEFAULT_CONTEXT_POLICIES: ContextPolicies = { device: "hold", network: "log", travel: "hold" };

/** When a move is travel (SESSION_TRAVEL_MAX_KMH, SESSION_TRAVEL_MIN_KM). */
export interface TravelLimits {
  maxKmh: number;
  minKm: number;
}

/**
 * An airliner's ground speed, jet stream included, stays below about 1,000 km/h; 2,000 km is
 * above the jitter of IP geolocation inside one provider's region (a mobile carrier's addresses
 * placed at its gateways up to ~1,200 km apart) and below any ocean crossing (BENCHMARKS.md).
 */
export const DEFAULT_TRAVEL_LIMITS: TravelLimits = { maxKmh: 1000, minKm: 2000 };

/**
 * A call's context as compared: browser family (no version: browsers update themselves) and
 * OS, "" when the User-Agent names none; country (ISO 3166-1 alpha-2), ASN and place (degrees),
 * null when unknown (a place is known with both its coordinates or not at all).
 */
export interface ClientContext extends DeviceFace {
  country: string | null;
  asn: number | null;
  latitude: number | null;
  longitude: number | null;
}

/** A place in degrees, as Cloudflare gives it. */
export interface Coordinates {
  latitude: number;
  longitude: number;
}

/**
 * What a `context_changed` event records: the session's last seen context and the new one; on
 * travel also both places, the great-circle distance between them and the speed it needed.
 */
export interface ContextChange {
  before: { browser: string | null; os: string | null; country: string | null; asn: number | null };
  after: { browser: string | null; os: string | null; country: string | null; asn: number | null };
  travel?: { from: Coordinates; to: Coordinates; distance_km: number; speed_kmh: number | null };
}

/**
 * What a login flow passes for the request it serves: its User-Agent and Cloudflare's
 * `request.cf` country, ASN, latitude and longitude (strings there; numbers accepted too).
 */
export interface ContextInput {
  userAgent?: string | null;
  country?: string | null;
  asn?: number | null;
  latitude?: string | number | null;
  longitude?: string | number | null;
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

const DEGREES = /^-?\d{1,3}(\.\d{1,10})?$/;

/** A coordinate in degrees within ±`limit`, from Cloudflare's string or a number; null otherwise. */
function degreesOf(value: unknown, limit: number): number | null {
  const degrees = typeof value === "string" && DEGREES.test(value) ? Number(value) : value;
  return typeof degrees === "number" && Number.isFinite(degrees) && Math.abs(degrees) <= limit ? degrees : null;
}

/** Both coordinates, or neither: half a place is no place. */
function coordinatesOf(latitude: unknown, longitude: unknown): Coordinates | null {
  const place = { latitude: degreesOf(latitude, 90), longitude: degreesOf(longitude, 180) };
  return place.latitude === null || place.longitude === null ? null : (place as Coordinates);
}

/** What an entry point knows of a call: its User-Agent and Cloudflare's `request.cf` fields (or the login flow's copy of them). */
export type CallFrom = { [K in keyof ContextInput]?: unknown };

/** A call's context from what its entry point knows: anything not of the expected form counts as unknown. */
export function clientContext({ userAgent, country, asn, latitude, longitude }: CallFrom): ClientContext {
  const place = coordinatesOf(latitude, longitude);
  return {
    ...faceOf(parseDevice(typeof userAgent === "string" ? userAgent : "")),
    country: countryOf(country),
    asn: asnOf(asn),
    latitude: place?.latitude ?? null,
    longitude: place?.longitude ?? null,
  };
}

/** The context a login flow passed on (RPC, admin API), if any; anything but an object is InvalidInput. */
export function checkContextInput(context: unknown): ClientContext | null {
  if (context === undefined) return null;
  if (typeof context !== "object" || context === null)
    throw new InvalidInput("context must be an object of userAgent, country, asn, latitude and longitude");
  return clientContext(context as CallFrom);
}
