import { type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { ACTIONS } from "../domain/actions.ts";
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
import { ofOrganization } from "./liveness.ts";
import { organizationPolicies, sessions } from "./schema.ts";

// The session context check (src/domain/client-context.ts) as SQL conditions and values, for the
// statements at the head of an operation's batch (src/db/authenticated.ts): the statements after
// them see the session as the check left it (ended, or held), so the check costs no
// round trip of its own. A member's session is judged by its organization's policies and travel
// limits (docs/organization-policy.md), read with its row: which statements a batch sends follows
// from the deployment's (`acts`), what each does to a row from the row's own.

/**
 * The caller's context and what a change of it does, by the vars: the deployment's, and a
 * member's where its organization's policy says nothing. Null: the context is unknown, nothing
 * is checked.
 */
export interface ContextCheck {
  context: ClientContext;
  policies: ContextPolicies;
  travel: TravelLimits;
  /** The user just proved who they are (a re-authentication): a change is only logged, by any policy. */
  logOnly: boolean;
}

/** A check as the caller's batch sends it: and whether the caller is a member (src/db/liveness.ts `TokenProof`). */
export interface CallerCheck extends ContextCheck {
  /** Its organization may act on a change where no var does. */
  member: boolean;
}

const NOTHING = sql`0`;

/** A browser's session (issued for the cookie, or bound to a browser's key): where its cookie is used is recorded. */
export const isBrowsers = sql`(${sessions.carrier} IN ('cookie', 'both') OR ${sessions.dbscKeyThumbprint} IS NOT NULL)`;

/** A browser's session that the check judges: a device-bound one is not, its key proves the device. */
export const isJudged = sql`(${sessions.carrier} IN ('cookie', 'both') AND ${sessions.dbscKeyThumbprint} IS NULL)`;

/**
 * Some kind of change does `policy`, by the deployment's policies, or may for a member by its
 * organization's: which statements the batch sends.
 */
export function acts({ policies, member }: CallerCheck, ...policy: ContextPolicy[]): boolean {
  return member || CONTEXT_KINDS.some((kind) => policy.includes(policies[kind]));
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
const judged = (column: ContextKind | "km" | "kmh" | "change") => sql.raw(`"judged"."${column}"`);

/** The policy row's column of each kind's action. */
const POLICY_OF = {
  device: organizationPolicies.contextDevice,
  network: organizationPolicies.contextNetwork,
  travel: organizationPolicies.contextTravel,
} as const;

/**
 * A setting of the caller's row: a member's organization's policy's `column`, else the var's
 * (`otherwise`); one outside any organization compiles the var's alone.
 */
function settingOf({ member }: CallerCheck, column: SQLWrapper, otherwise: SQL): SQL {
  return member ? sql`coalesce((SELECT ${column} FROM ${ofOrganization}), ${otherwise})` : otherwise;
}

/**
 * The action of a change of `kind` on the session's row: its organization's, else the var's (a
 * constant of the SQL text: the shape's); `log` for any but `ignore` when `logOnly`.
 */
function actionOf(check: CallerCheck, kind: ContextKind): SQL {
  const { policies, logOnly } = check;
  const action = settingOf(check, POLICY_OF[kind], sql.raw(`'${policies[kind]}'`));
  return logOnly ? sql`CASE ${action} WHEN 'ignore' THEN 'ignore' ELSE 'log' END` : action;
}

/**
 * The caller's context judged once against the session's row `id` (as it was before the batch's
 * UPDATE), as a one-row table `judged`: for each kind, the action its change takes (the
 * session's organization's policy, else the var's; null: no change, or the context cannot tell)
 * and, for the `event` (`contextChange`), the distance from the place last seen (km), the speed
 * it needed (kmh; null: no time passed) and the event's before and after (change); a statement
 * that reads only the kinds compiles none of those. Every statement of the head reads its kinds
 * from here, so each of the caller's values is bound once per statement: D1 binds at most 100.
 * Travel: farther than the minimum, and than the top speed covers since (the organization's
 * limits, else the vars'); no time passed counts as too fast.
 */
export function judgement(check: CallerCheck, now: When, id: string, event: boolean): SQL {
  const { context, travel } = check;
  const placed = context.latitude !== null;
  const p = organizationPolicies;
  const change = event ? sql`, ${changeOf(context)} AS "change"` : sql``;
  const network = networkChanged(context);
  const place = placed
    ? sql`${distanceKm(context)} AS "km", ${millis(now)} - ${sessions.seenPlaceAt} AS "since", ${settingOf(check, p.travelMinKm, sql`${travel.minKm}`)} AS "min_km", ${settingOf(check, p.travelMaxKmh, sql`${travel.maxKmh}`)} AS "max_kmh", ${actionOf(check, "travel")} AS "travel"`
    : sql`NULL AS "km", NULL AS "travel"`;
  const measured = sql`SELECT CASE WHEN ${deviceChanged(context)} THEN ${actionOf(check, "device")} END AS "device", ${network ? sql`CASE WHEN ${network} THEN ${actionOf(check, "network")} END` : sql`NULL`} AS "network", ${place}${change} FROM ${sessions} WHERE ${sessions.id} = ${id}`;
  const traveled = placed
    ? sql`CASE WHEN "km" > "min_km" AND "km" * 3600000 > "max_kmh" * "since" THEN "travel" END AS "travel"`
    : sql`"travel"`;
  const measures = event
    ? sql`, "km", ${placed ? sql`"km" * 3600000 / nullif(max("since", 0), 0)` : sql`NULL`} AS "kmh", "change"`
    : sql``;
  // LIMIT 1 (one row is all it has) keeps it a table of its own: flattened into the statement,
  // SQLite compiles the distance and the JSON again into each column that reads them, and
  // compiling is most of what the head's SQL costs (BENCHMARKS.md, The judged request's SQL).
  return sql`(SELECT "device", "network", ${traveled}${measures} FROM (${measured}) LIMIT 1) AS "judged"`;
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
 * The action in `column` is one of `policies`, as comparisons: an IN list is an ephemeral table
 * of its own, whose rows D1 counts as read on every request.
 */
function isAmong(column: SQL, policies: ContextPolicy[]): SQL {
  const others = ACTIONS.filter((action) => !policies.includes(action));
  if (others.length === 1) return sql`${column} <> '${sql.raw(others[0] as string)}'`;
  return sql.join(
    policies.map((policy) => sql`${column} = '${sql.raw(policy)}'`),
    sql` OR `,
  );
}

/**
 * A change of a kind whose action (`judgement`: the row's own) is one of `policies`, on
 * `judgement`'s row (0, never null: an unknown column judges nothing).
 */
export function changedUnder(check: ContextCheck, ...policies: ContextPolicy[]): SQL {
  const kinds = told(check);
  if (kinds.length === 0) return NOTHING;
  return sql`coalesce(${sql.join(
    kinds.map((kind) => isAmong(judged(kind), policies)),
    sql` OR `,
  )}, 0)`;
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
 * How far the place must have moved to be recorded anew: the fraction of the session's minimum
 * travel, its organization's when it sets one (read only for a member's row).
 */
function placeMoveKm({ travel, member }: CallerCheck): SQL {
  const min = organizationPolicies.travelMinKm;
  return member
    ? sql`coalesce((SELECT ${min} FROM ${ofOrganization}), ${travel.minKm}) * ${PLACE_MOVE_OF_MIN_KM}`
    : sql`${travel.minKm * PLACE_MOVE_OF_MIN_KM}`;
}

/**
 * Anything recorded of the context differs from the caller's (what it does not tell is kept):
 * the place only once it moved far enough.
 */
export function differs(check: CallerCheck): SQL {
  const { context } = check;
  const country = context.country === null ? sql`` : sql` OR ${sessions.seenCountry} IS NOT ${context.country}`;
  const asn = context.asn === null ? sql`` : sql` OR ${sessions.seenAsn} IS NOT ${context.asn}`;
  const place =
    context.latitude === null ? sql`` : sql` OR coalesce(${distanceKm(context)} > ${placeMoveKm(check)}, 1)`;
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
 * speed (null: no time passed), unless the session's policy ignores travel: the event of another
 * kind must not name it (a receiver's risk reason reads it, src/services/ssf/session-sets.ts).
 */
export function contextChange(check: ContextCheck): SQL {
  if (!told(check).includes("travel")) return judged("change");
  const { latitude, longitude } = check.context;
  const { seenLatitude, seenLongitude } = sessions;
  return sql`CASE WHEN ${judged("travel")} <> 'ignore' THEN json_insert(${judged("change")}, '$.travel', json_object('from', json_object('latitude', ${seenLatitude}, 'longitude', ${seenLongitude}), 'to', json_object('latitude', ${latitude}, 'longitude', ${longitude}), 'distance_km', CAST(round(${judged("km")}) AS INTEGER), 'speed_kmh', CAST(round(${judged("kmh")}) AS INTEGER))) ELSE ${judged("change")} END`;
}
