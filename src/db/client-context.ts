import { type SQL, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import {
  type ClientContext,
  CONTEXT_KINDS,
  type ContextKind,
  type ContextPolicies,
  type ContextPolicy,
  type TravelLimits,
} from "../domain/client-context.ts";
import { millis, type When } from "./compiled.ts";
import { sameDeviceAs } from "./device.ts";
import { sessions } from "./schema.ts";

// The session context check (src/domain/client-context.ts) as SQL conditions and values, for the
// statements at the head of an operation's batch (src/db/authenticated.ts): the statements after
// them see the session as the check left it (ended, or held), so the check costs no
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
  return sql`(${sessions.seenBrowser} IS NOT NULL AND NOT ${sameDeviceAs(context, sessions.seenBrowser, sessions.seenOs)})`;
}

/** The ASN and the country both differ from the last seen, all four known; null: it cannot, one is unknown. */
function networkChanged({ country, asn }: ClientContext): SQL | null {
  if (country === null || asn === null) return null;
  return sql`(${sessions.seenCountry} != ${country} AND ${sessions.seenAsn} != ${asn})`;
}

/** Mean Earth radius (IUGG), km: a constant of the SQL text. */
const EARTH_KM = sql.raw("6371.0088");

/** The great-circle distance in km from the place last seen to the caller's (haversine); null when either is unknown. */
function distanceKm({ latitude, longitude }: ClientContext): SQL<number | null> {
  const { seenLatitude: lat0, seenLongitude: long0 } = sessions;
  const half = (a: unknown, b: unknown) => sql`pow(sin(radians(${a} - ${b}) / 2), 2)`;
  const h = sql`${half(latitude, lat0)} + cos(radians(${lat0})) * cos(radians(${latitude})) * ${half(longitude, long0)}`;
  return sql`(2 * ${EARTH_KM} * asin(min(1, sqrt(${h}))))`;
}

/**
 * The session's last seen context and the caller's (the after keeps what the caller did not
 * tell), as the event's JSON: a context change's, and a relink's (the sign-in that caused it).
 */
export function changeOf({ browser, os, country, asn }: ClientContext): SQL {
  const { seenBrowser, seenOs, seenCountry, seenAsn } = sessions;
  return sql`json_object('before', json_object('browser', nullif(${seenBrowser}, ''), 'os', nullif(${seenOs}, ''), 'country', ${seenCountry}, 'asn', ${seenAsn}), 'after', json_object('browser', nullif(${browser}, ''), 'os', nullif(${os}, ''), 'country', coalesce(${country}, ${seenCountry}), 'asn', coalesce(${asn}, ${seenAsn})))`;
}

/** A column of `judgement`'s row. */
const judged = (column: "device" | "network" | "travel" | "km" | "kmh" | "change") => sql.raw(`"judged"."${column}"`);

/**
 * The caller's context judged once against the session's row `id` (as it was before the batch's
 * UPDATE), as a one-row table `judged`: whether each kind changed (null: the context cannot tell)
 * and, for the `event` (`contextChange`), the distance from the place last seen (km), the speed
 * it needed (kmh; null: no time passed) and the event's before and after (change); a statement
 * that reads only the kinds compiles none of those. Every statement of the head reads its kinds
 * from here, so each of the caller's values is bound once per statement: D1 binds at most 100.
 * Travel: farther than the minimum, and than the top speed covers since; no time passed counts
 * as too fast.
 */
export function judgement(check: ContextCheck, now: When, id: string, event: boolean): SQL {
  const { context, travel } = check;
  const placed = context.latitude !== null;
  const change = event ? sql`, ${changeOf(context)} AS "change"` : sql``;
  const measured = sql`SELECT ${deviceChanged(context)} AS "device", ${networkChanged(context) ?? sql`NULL`} AS "network", ${placed ? distanceKm(context) : sql`NULL`} AS "km", ${placed ? sql`${millis(now)} - ${sessions.seenPlaceAt}` : sql`NULL`} AS "since"${change} FROM ${sessions} WHERE ${sessions.id} = ${id}`;
  const measures = event ? sql`, "km", "km" * 3600000 / nullif(max("since", 0), 0) AS "kmh", "change"` : sql``;
  // LIMIT 1 (one row is all it has) keeps it a table of its own: flattened into the statement,
  // SQLite compiles the distance and the JSON again into each column that reads them, and
  // compiling is most of what the head's SQL costs (BENCHMARKS.md, The judged request's SQL).
  return sql`(SELECT "device", "network", ("km" > ${travel.minKm} AND "km" * 3600000 > ${travel.maxKmh} * "since") AS "travel"${measures} FROM (${measured}) LIMIT 1) AS "judged"`;
}

/** The kinds the caller's context can tell: a network needs its country and ASN, travel its place. */
function told({ context }: ContextCheck): ContextKind[] {
  return CONTEXT_KINDS.filter(
    (kind) =>
      (kind !== "network" || (context.country !== null && context.asn !== null)) &&
      (kind !== "travel" || context.latitude !== null),
  );
}

/**
 * A change of a kind whose policy is one of `policies`, on `judgement`'s row (0, never null: an
 * unknown column judges nothing).
 */
export function changedUnder(check: ContextCheck, ...policies: ContextPolicy[]): SQL {
  const kinds = told(check).filter((kind) => policies.includes(check.policies[kind]));
  return kinds.length === 0 ? NOTHING : sql`coalesce(${sql.join(kinds.map(judged), sql` OR `)}, 0)`;
}

/** `changedUnder` as a value for a statement that reads the session's row alone (a DELETE's, an UPDATE's). */
export function changedUnderOf(judgement: SQL, check: ContextCheck, ...policies: ContextPolicy[]): SQL {
  return sql`(SELECT ${changedUnder(check, ...policies)} FROM ${judgement})`;
}

/**
 * A place is recorded anew only farther than this fraction of SESSION_TRAVEL_MIN_KM from the last
 * one (500 km by default): a mobile carrier's addresses, placed at its gateways a few hundred km
 * apart, would otherwise write the row on nearly every request (test/context-trace.test.ts).
 * Travel is then judged from a place at most a quarter of the minimum off, and a placed use
 * refreshes a stale place anyway (src/db/authenticated.ts).
 */
const PLACE_MOVE_OF_MIN_KM = 0.25;

/**
 * Anything recorded of the context differs from the caller's (what it does not tell is kept):
 * the place only once it moved far enough.
 */
export function differs({ context, travel }: ContextCheck): SQL {
  const country = context.country === null ? sql`` : sql` OR ${sessions.seenCountry} IS NOT ${context.country}`;
  const asn = context.asn === null ? sql`` : sql` OR ${sessions.seenAsn} IS NOT ${context.asn}`;
  const place =
    context.latitude === null
      ? sql``
      : sql` OR coalesce(${distanceKm(context)} > ${travel.minKm * PLACE_MOVE_OF_MIN_KM}, 1)`;
  return sql`(${sessions.seenBrowser} IS NOT ${context.browser} OR ${sessions.seenOs} IS NOT ${context.os}${country}${asn}${place})`;
}

/**
 * The caller's context as the session's last seen, for a browser's session only (SET reads the
 * row as it was). A call that gives no place keeps the last one and its time: a request
 * Cloudflare could not place must not wipe what the next one is judged against.
 */
export function seenValues({ context }: ContextCheck, now: When) {
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
          seenPlaceAt: ifBrowsers(millis(now), sessions.seenPlaceAt),
        }),
  };
}

/**
 * The event's context, on `judgement`'s row: on travel also both places, the distance and the
 * speed (null: no time passed), unless travel is allowed: the event of another kind must not
 * name it (a receiver's risk reason reads it, src/services/ssf/session-sets.ts).
 */
export function contextChange(check: ContextCheck): SQL {
  if (check.policies.travel === "ignore" || !told(check).includes("travel")) return judged("change");
  const { latitude, longitude } = check.context;
  const { seenLatitude, seenLongitude } = sessions;
  return sql`CASE WHEN ${judged("travel")} THEN json_insert(${judged("change")}, '$.travel', json_object('from', json_object('latitude', ${seenLatitude}, 'longitude', ${seenLongitude}), 'to', json_object('latitude', ${latitude}, 'longitude', ${longitude}), 'distance_km', CAST(round(${judged("km")}) AS INTEGER), 'speed_kmh', CAST(round(${judged("kmh")}) AS INTEGER))) ELSE ${judged("change")} END`;
}
