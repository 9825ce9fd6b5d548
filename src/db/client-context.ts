import { type SQL, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { type ClientContext, type ContextPolicies, type ContextPolicy, sameDevice } from "../domain/client-context.ts";
import { sessions } from "./schema.ts";

// The session context check (src/domain/client-context.ts) as SQL conditions and values, for the
// statements at the head of an operation's batch (src/db/authenticated.ts): the statements after
// them see the session as the check left it (ended, or held for step-up), so the check costs no
// round trip of its own.

/** The caller's context and what a change of it does; null: the context is unknown, nothing is checked. */
export interface ContextCheck {
  context: ClientContext;
  policies: ContextPolicies;
}

const NOTHING = sql`0`;

/** A browser's session (issued for the cookie, or bound to a browser's key): where its cookie is used is recorded. */
export const isBrowsers = sql`(${sessions.carrier} IN ('cookie', 'both') OR ${sessions.dbscKeyThumbprint} IS NOT NULL)`;

/** A browser's session that the check judges: a device-bound one is not, its key proves the device. */
export const isJudged = sql`(${sessions.carrier} IN ('cookie', 'both') AND ${sessions.dbscKeyThumbprint} IS NULL)`;

/** Some kind of change does `policy`. */
export function acts({ policies }: ContextCheck, ...policy: ContextPolicy[]): boolean {
  return policy.includes(policies.device) || policy.includes(policies.network);
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

/** A change of a kind whose policy is one of `policies`. */
export function changedUnder(check: ContextCheck, ...policies: ContextPolicy[]): SQL {
  const kinds = [
    policies.includes(check.policies.device) ? deviceChanged(check.context) : null,
    policies.includes(check.policies.network) ? networkChanged(check.context) : null,
  ].filter((kind) => kind !== null);
  return kinds.length === 0 ? NOTHING : sql`(${sql.join(kinds, sql` OR `)})`;
}

/** Anything recorded of the context differs from the caller's (what it does not tell is kept). */
export function differs({ context }: ContextCheck): SQL {
  const country = context.country === null ? sql`` : sql` OR ${sessions.seenCountry} IS NOT ${context.country}`;
  const asn = context.asn === null ? sql`` : sql` OR ${sessions.seenAsn} IS NOT ${context.asn}`;
  return sql`(${sessions.seenBrowser} IS NOT ${context.browser} OR ${sessions.seenOs} IS NOT ${context.os}${country}${asn})`;
}

/** The caller's context as the session's last seen, for a browser's session only (SET reads the row as it was). */
export function seenValues({ context }: ContextCheck) {
  const ifBrowsers = (value: unknown, column: AnySQLiteColumn) =>
    sql`CASE WHEN ${isBrowsers} THEN ${value} ELSE ${column} END`;
  return {
    seenBrowser: ifBrowsers(context.browser, sessions.seenBrowser),
    seenOs: ifBrowsers(context.os, sessions.seenOs),
    seenCountry: ifBrowsers(sql`coalesce(${context.country}, ${sessions.seenCountry})`, sessions.seenCountry),
    seenAsn: ifBrowsers(sql`coalesce(${context.asn}, ${sessions.seenAsn})`, sessions.seenAsn),
  };
}

/** The session's last seen context and the caller's, for the event (the after keeps what the caller did not tell). */
export function contextChange({ context }: ContextCheck): SQL {
  const { browser, os, country, asn } = context;
  const { seenBrowser, seenOs, seenCountry, seenAsn } = sessions;
  return sql`json_object('before', json_object('browser', nullif(${seenBrowser}, ''), 'os', nullif(${seenOs}, ''), 'country', ${seenCountry}, 'asn', ${seenAsn}), 'after', json_object('browser', nullif(${browser}, ''), 'os', nullif(${os}, ''), 'country', coalesce(${country}, ${seenCountry}), 'asn', coalesce(${asn}, ${seenAsn})))`;
}
