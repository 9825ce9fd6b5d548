import { type SQL, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import {
  type ClientContext,
  CONTEXT_KINDS,
  type ContextKind,
  type ContextPolicies,
  type ContextPolicy,
  sameDevice,
  type TravelLimits,
} from "../domain/client-context.ts";
import { sessions } from "./schema.ts";

// The session context check (src/domain/client-context.ts) as SQL conditions and values, for the
// statements at the head of an operation's batch (src/db/authenticated.ts): the statements after
// them see the session as the check left it (ended, or held for step-up), so the check costs no
// round trip of its own.

/** The caller's context and what a change of it does; null: the context is unknown, nothing is checked. */
export interface ContextCheck {
  context: ClientContext;
  policies: ContextPolicies;
  travel: TravelLimits;
}

const NOTHING = sql`0`;

/** A browser's session (issued for the cookie, or bound to a browser's key): where its cookie is used is recorded. */
export const isBrowsers = sql`(${sessions.carrier} IN ('cookie', 'both') OR ${sessions.dbscKeyThumbprint} IS NOT NULL)`;

/** A browser's session that the check judges: a device-bound one is not, its key proves the device. */
export const isJudged = sql`(${sessions.carrier} IN ('cookie', 'both') AND ${sessions.dbscKeyThumbprint} IS NULL)`;

/** Some kind of change does `policy`. */
export function acts({ policies }: ContextCheck, ...policy: ContextPolicy[]): boolean {
  return CONTEXT_KINDS.some((kind) => policy.includes(policies[kind]));
}

/** The browser family and OS last seen are not the caller's device (unknown on a session that has none recorded). */
function deviceChanged(context: ClientContext): SQL {
  const same = sameDevice(context).map(
    ([browser, os]) => sql`(${sessions.seenBrowser} = ${browser} AND ${sessions.seenOs} = ${os})`,
  );
  return sql`(${sessions.seenBrowser} IS NOT NULL AND NOT (${sql.join(same, sql` OR `)}))`;
}

/** The ASN and the country both differ from the last seen, all four known; null: it cannot, one is unknown. */
function networkChanged({ country, asn }: ClientContext): SQL | null {
  if (country === null || asn === null) return null;
  return sql`(${sessions.seenCountry} != ${country} AND ${sessions.seenAsn} != ${asn})`;
}

/** Mean Earth radius (IUGG), km. */
const EARTH_KM = 6371.0088;

/** The great-circle distance in km from the place last seen to the caller's (haversine); null when either is unknown. */
function distanceKm({ latitude, longitude }: ClientContext): SQL<number | null> {
  const { seenLatitude: lat0, seenLongitude: long0 } = sessions;
  const half = (a: unknown, b: unknown) => sql`pow(sin(radians(${a} - ${b}) / 2), 2)`;
  const h = sql`${half(latitude, lat0)} + cos(radians(${lat0})) * cos(radians(${latitude})) * ${half(longitude, long0)}`;
  return sql`(2 * ${EARTH_KM} * asin(min(1, sqrt(${h}))))`;
}

/** Milliseconds since the place last seen was seen. */
function sinceSeen(now: Date): SQL<number | null> {
  return sql`(${now.getTime()} - ${sessions.seenPlaceAt})`;
}

/**
 * The caller is farther from the place last seen than the minimum, and farther than the top
 * speed covers since; null: it cannot be, a place is unknown. No time passed counts as too fast.
 */
function travelled(check: ContextCheck, now: Date): SQL | null {
  if (check.context.latitude === null) return null;
  const distance = distanceKm(check.context);
  const { minKm, maxKmh } = check.travel;
  return sql`(${distance} > ${minKm} AND ${distance} * 3600000 > ${maxKmh} * ${sinceSeen(now)})`;
}

/** Each kind of change, as SQL: null when the caller's context cannot tell it. */
function changes(check: ContextCheck, now: Date): Record<ContextKind, SQL | null> {
  return {
    device: deviceChanged(check.context),
    network: networkChanged(check.context),
    travel: travelled(check, now),
  };
}

/** A change of a kind whose policy is one of `policies` (0, never null: an unknown column judges nothing). */
export function changedUnder(check: ContextCheck, now: Date, ...policies: ContextPolicy[]): SQL {
  const all = changes(check, now);
  const kinds = CONTEXT_KINDS.filter((kind) => policies.includes(check.policies[kind]))
    .map((kind) => all[kind])
    .filter((kind) => kind !== null);
  return kinds.length === 0 ? NOTHING : sql`coalesce(${sql.join(kinds, sql` OR `)}, 0)`;
}

/** Anything recorded of the context differs from the caller's (what it does not tell is kept). */
export function differs({ context }: ContextCheck): SQL {
  const country = context.country === null ? sql`` : sql` OR ${sessions.seenCountry} IS NOT ${context.country}`;
  const asn = context.asn === null ? sql`` : sql` OR ${sessions.seenAsn} IS NOT ${context.asn}`;
  const place =
    context.latitude === null
      ? sql``
      : sql` OR ${sessions.seenLatitude} IS NOT ${context.latitude} OR ${sessions.seenLongitude} IS NOT ${context.longitude}`;
  return sql`(${sessions.seenBrowser} IS NOT ${context.browser} OR ${sessions.seenOs} IS NOT ${context.os}${country}${asn}${place})`;
}

/**
 * The caller's context as the session's last seen, for a browser's session only (SET reads the
 * row as it was). A call that gives no place keeps the last one and its time: a request
 * Cloudflare could not place must not wipe what the next one is judged against.
 */
export function seenValues({ context }: ContextCheck, now: Date) {
  const ifBrowsers = (value: unknown, column: AnySQLiteColumn) =>
    sql`CASE WHEN ${isBrowsers} THEN ${value} ELSE ${column} END`;
  return {
    seenBrowser: ifBrowsers(context.browser, sessions.seenBrowser),
    seenOs: ifBrowsers(context.os, sessions.seenOs),
    seenCountry: ifBrowsers(sql`coalesce(${context.country}, ${sessions.seenCountry})`, sessions.seenCountry),
    seenAsn: ifBrowsers(sql`coalesce(${context.asn}, ${sessions.seenAsn})`, sessions.seenAsn),
    ...(context.latitude === null
      ? {}
      : {
          seenLatitude: ifBrowsers(context.latitude, sessions.seenLatitude),
          seenLongitude: ifBrowsers(context.longitude, sessions.seenLongitude),
          seenPlaceAt: ifBrowsers(now.getTime(), sessions.seenPlaceAt),
        }),
  };
}

/**
 * The session's last seen context and the caller's, for the event (the after keeps what the
 * caller did not tell); on travel also both places, the distance and the speed (null: no time passed).
 */
export function contextChange(check: ContextCheck, now: Date): SQL {
  const { browser, os, country, asn, latitude, longitude } = check.context;
  const { seenBrowser, seenOs, seenCountry, seenAsn, seenLatitude, seenLongitude } = sessions;
  const change = sql`json_object('before', json_object('browser', nullif(${seenBrowser}, ''), 'os', nullif(${seenOs}, ''), 'country', ${seenCountry}, 'asn', ${seenAsn}), 'after', json_object('browser', nullif(${browser}, ''), 'os', nullif(${os}, ''), 'country', coalesce(${country}, ${seenCountry}), 'asn', coalesce(${asn}, ${seenAsn})))`;
  const travel = travelled(check, now);
  if (travel === null) return change;
  const distance = distanceKm(check.context);
  const speed = sql`${distance} * 3600000 / nullif(max(${sinceSeen(now)}, 0), 0)`;
  return sql`CASE WHEN ${travel} THEN json_insert(${change}, '$.travel', json_object('from', json_object('latitude', ${seenLatitude}, 'longitude', ${seenLongitude}), 'to', json_object('latitude', ${latitude}, 'longitude', ${longitude}), 'distance_km', CAST(round(${distance}) AS INTEGER), 'speed_kmh', CAST(round(${speed}) AS INTEGER))) ELSE ${change} END`;
}
