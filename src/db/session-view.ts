import { type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { type JsonText, type NamedSession, SESSION_NAME, type SessionView } from "../domain/session-view.ts";
import { sessions } from "./schema.ts";

// A listed session as the list shows it (`SessionView`), written by SQLite as JSON text in the
// list's own statement: the worker hands D1's answer on as it is, and spends nothing per session
// on decoding rows, building objects, formatting times and serializing them again, which was
// most of a long list's CPU (BENCHMARKS.md, Reading). Each member is written as the view's
// documentation says; test/list-answer.test.ts holds the answer byte for byte to the renderer
// the worker used before.

/** `column` (milliseconds since the epoch) as `Date.prototype.toISOString` writes it, in integers only. */
export function isoTime(column: AnySQLiteColumn): SQL<string> {
  return sql`strftime('%Y-%m-%dT%H:%M:%S', ${column} / 1000, 'unixepoch') || printf('.%03dZ', ${column} % 1000)`;
}

/** Text that is absent when empty, as JavaScript's truthiness reads a string. */
const present = (column: SQLWrapper) => sql`nullif(${column}, '')`;

/** One of the name's words, a constant of the SQL text. */
const word = (text: string) => sql.raw(`'${text.replaceAll("'", "''")}'`);

/**
 * `sessionName` (src/domain/session-view.ts) in SQL, of a session's columns or values bound: an
 * OS and an IP only when not empty, as JavaScript's truthiness reads a string.
 */
export function sessionNameOf({
  browser,
  os,
  ipAddress,
  supportAgent,
}: Record<keyof NamedSession, SQLWrapper>): SQL<string> {
  return sql`CASE WHEN ${supportAgent} IS NOT NULL THEN ${word(SESSION_NAME.support)} || ${supportAgent}
  ELSE coalesce(${browser}, ${word(SESSION_NAME.unknownBrowser)})
    || coalesce(${word(SESSION_NAME.os)} || ${present(os)}, '')
    || coalesce(${word(SESSION_NAME.ip)} || ${present(ipAddress)}, '') END`;
}

/** `City, CC`, either alone, or null. */
const location = sql`coalesce(${present(sessions.city)} || ', ' || ${present(sessions.country)}, ${present(sessions.city)}, ${present(sessions.country)})`;

/** Where the session was last used from; null before anything was recorded. */
const lastSeen = sql`CASE WHEN ${sessions.seenBrowser} IS NOT NULL THEN json_object(
  'browser', ${present(sessions.seenBrowser)}, 'os', ${present(sessions.seenOs)},
  'country', ${sessions.seenCountry}, 'asn', ${sessions.seenAsn}) END`;

/**
 * Every member, in the view's order, then the ones this session does not have removed: a member
 * that is only sometimes there is absent, never null, and the others keep their places.
 */
export function rendered(members: SQL, optional: [member: string, presentWhen: SQL][]): SQL<string> {
  // The paths are this file's own constants, written into the SQL rather than bound.
  const removed = optional.map(
    ([member, when]) => sql`CASE WHEN ${when} THEN '$.none' ELSE ${sql.raw(`'$.${member}'`)} END`,
  );
  return sql<string>`json_remove(json_object(${members}), ${sql.join(removed, sql`, `)})`;
}

const viewMembers = sql`'id', ${sessions.id},
  'name', ${sessionNameOf(sessions)},
  'ip_address', coalesce(${sessions.ipAddress}, ''),
  'user_agent', ${sessions.userAgent},
  'created_at', ${isoTime(sessions.createdAt)},
  'expires_at', ${isoTime(sessions.expiresAt)},
  'last_active_at', ${isoTime(sessions.lastActiveAt)},
  'location', ${location},
  'device', json_object('browser', ${sessions.browser}, 'os', ${sessions.os}, 'type', ${sessions.deviceType}),
  'device_bound', json('true'),
  'last_seen', json(${lastSeen}),
  'actor', json_object('sub', ${sessions.supportAgent}, 'reason', coalesce(${sessions.supportReason}, ''))`;
const bound = sql`${sessions.dbscKeyThumbprint} IS NOT NULL`;
const support = sql`${sessions.supportAgent} IS NOT NULL`;

/** The user's own list: `SessionView`. */
export const SESSION_VIEW = rendered(viewMembers, [
  ["device_bound", bound],
  ["actor", support],
]);

/**
 * The upstream sign-in (`upstreamSignInView`, src/domain/upstreams/sign-in.ts): `session_expiry`
 * and its `bound` only when the provider gave one, the bound as `expiryLimit` judges it.
 */
const upstreamView = rendered(
  sql`'provider', ${sessions.upstream}, 'subject', coalesce(${sessions.upstreamSubject}, ''), 'sid', ${sessions.upstreamSid},
  'session_expiry', ${isoTime(sessions.upstreamExpiresAt)},
  'bound', CASE WHEN ${sessions.expiresAt} >= ${sessions.upstreamExpiresAt} THEN 'session_expiry' ELSE 'session' END`,
  [
    ["session_expiry", sql`${sessions.upstreamExpiresAt} IS NOT NULL`],
    ["bound", sql`${sessions.upstreamExpiresAt} IS NOT NULL`],
  ],
);

/** A backend's list (SessionService.listUserSessions): the view, the upstream sign-in behind it and its organization. */
export const BACKEND_SESSION_VIEW = rendered(
  sql`${viewMembers}, 'upstream', json(${upstreamView}), 'organization', ${sessions.organizationId}`,
  [
    ["device_bound", bound],
    ["actor", support],
    ["upstream", sql`${sessions.upstream} IS NOT NULL`],
  ],
);

/**
 * Views (`rendered`'s JSON texts) as one JSON array, in `order`: the texts joined as text, which
 * needs neither a re-parse of each (`json_group_array` would quote a view whose JSON subtype the
 * aggregate's sort dropped) nor that subtype. Over no row it is `[]`.
 */
export function joinedViews(view: SQLWrapper, order: SQL): SQL<string> {
  return sql<string>`coalesce('[' || group_concat(${view}, ',' ORDER BY ${order}) || ']', '[]')`;
}

/** The rendered sessions matching the statement's WHERE, newest first, as one JSON array. */
export function sessionListJson<V extends SessionView>(view: SQL): SQL<JsonText<V[]>> {
  return joinedViews(view, sql`${sessions.createdAt} DESC, ${sessions.id} DESC`).mapWith(
    (json: string) => json as JsonText<V[]>,
  );
}

/** An aggregate's array as D1 answers it: over no row it is still one row, `[]`, so only a bug leaves it out. */
export function arrayText<V>(value: unknown): JsonText<V[]> {
  if (typeof value !== "string") throw new Error("the aggregate's row has no array");
  return value as JsonText<V[]>;
}
