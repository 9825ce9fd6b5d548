import { sql } from "drizzle-orm";
import { index, integer, primaryKey, real, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { ACTIONS } from "../domain/actions.ts";
import type { StoredFactors } from "../domain/auth-factors.ts";
import { SESSION_CARRIERS } from "../domain/carrier.ts";
import type { ContextChange } from "../domain/client-context.ts";
import { DEVICE_TYPES } from "../domain/device.ts";
import { EVENT_TYPES } from "../domain/events.ts";
import type { SessionData } from "../domain/session-data.ts";
import { DELIVERY_METHODS, STATUSES } from "../domain/ssf/streams.ts";
import { RANDOM_LENGTH } from "../domain/token.ts";

// The single description of the tables: migrations are generated from this file.

export const sessions = sqliteTable(
  "sessions",
  {
    // Public: listed to the user and used in URLs. Also the first half of the token.
    id: text("id").primaryKey(),
    // SHA-256 (hex) of the token's secret half; the token itself is never stored.
    secretHash: text("secret_hash").notNull(),
    userId: text("user_id").notNull(),
    // Null when the client address was unknown or did not parse as an IP.
    ipAddress: text("ip_address"),
    userAgent: text("user_agent").notNull(),
    // Parsed from the user agent once, at creation, so listing never parses.
    browser: text("browser"),
    os: text("os"),
    deviceType: text("device_type", { enum: DEVICE_TYPES }).notNull(),
    // Where the edge saw the login (request.cf), when the login worker passed it on.
    country: text("country"),
    city: text("city"),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    expiresAt: integer("expires_at", { mode: "timestamp_ms" }).notNull(),
    // Refreshed at most every few minutes by authenticated requests; drives the idle timeout.
    lastActiveAt: integer("last_active_at", { mode: "timestamp_ms" }).notNull(),
    // The lifetime the session was issued with, which a sliding renewal grants again. 0: a member's
    // session ended by its organization's context policy (src/db/authenticated.ts), not live.
    ttlSeconds: integer("ttl_seconds").notNull(),
    // Browser family, OS and country (src/domain/device.ts `deviceKey`): what "a new device" compares, by `facesOf`.
    deviceKey: text("device_key").notNull(),
    // What the login flow verified (src/domain/auth-factors.ts): {factor: completion time in ms}, null
    // when it said nothing; merged with the new factors on re-authentication.
    authProofs: text("auth_proofs", { mode: "json" }).$type<StoredFactors>(),
    // NIST SP 800-63B AAL (1-3) when the login flow gave one.
    assuranceLevel: integer("assurance_level"),
    // The latest factor: created_at for sessions issued without factors.
    authenticatedAt: integer("authenticated_at", { mode: "timestamp_ms" }).notNull(),
    // Device binding (src/domain/device-binding.ts). The challenge the next proof must sign: issued
    // with a device-bound login, replaced by every proof or request for one; never accepted twice.
    dbscChallenge: text("dbsc_challenge"),
    // RFC 7638 thumbprint of the browser's public key; null: the session is not device-bound.
    dbscKeyThumbprint: text("dbsc_key_thumbprint"),
    // SHA-256 (hex) of the live bound cookie, and when it stops counting. Once bound, the token
    // proves the session only together with that cookie.
    boundCookieHash: text("bound_cookie_hash"),
    boundCookieExpiresAt: integer("bound_cookie_expires_at", { mode: "timestamp_ms" }),
    // The one a refresh replaced, good until its own expiry: the browser may refresh before
    // the cookie lapses, and requests already sent with it must still pass.
    previousBoundCookieHash: text("previous_bound_cookie_hash"),
    previousBoundCookieExpiresAt: integer("previous_bound_cookie_expires_at", { mode: "timestamp_ms" }),
    // Where the session was last used from (src/domain/client-context.ts): browser family and OS
    // ("" when the User-Agent names none), country and ASN (null when unknown). Null browser and
    // OS: not recorded yet (a session from before these columns), so its next use is not judged.
    seenBrowser: text("seen_browser"),
    seenOs: text("seen_os"),
    seenCountry: text("seen_country"),
    seenAsn: integer("seen_asn"),
    // The place last seen (Cloudflare's latitude and longitude, degrees) and when it was last used
    // from (to within the activity's 5 minutes): what travel is judged against. A use that gives no
    // place keeps them. Null: no place seen yet, nothing judged.
    seenLatitude: real("seen_latitude"),
    seenLongitude: real("seen_longitude"),
    seenPlaceAt: integer("seen_place_at", { mode: "timestamp_ms" }),
    // Held (src/domain/actions.ts): its context changed under SESSION_CONTEXT_* = hold, or its
    // identity provider asked (upstream_held_at): every operation but its own logout is refused
    // with the RFC 9470 challenge until `reauthenticate` gives it a new token. The column keeps
    // the name it was added under: a rename would fail the running version between a migration
    // and the deploy that follows it.
    held: integer("context_step_up", { mode: "boolean" }).notNull().default(false),
    // What may carry the token (src/domain/carrier.ts): `cookie` refuses it as Bearer; `cookie`
    // and `both` are a browser's, judged by their context when used through the cookie. Null: the
    // login flow did not say; either carrier, never judged.
    carrier: text("carrier", { enum: SESSION_CARRIERS }),
    // Support access (src/domain/support.ts): the agent acting on the user's behalf, and why.
    // Null on the user's own sessions.
    supportAgent: text("support_agent"),
    supportReason: text("support_reason"),
    // Application data (src/domain/session-data.ts): a JSON object of at most 2 KB the login flow
    // set and the system replaces or patches; null: none. Never listed, logged or signalled.
    data: text("data", { mode: "json" }).$type<SessionData>(),
    // The identity provider's sign-in behind the session (src/domain/upstreams/sign-in.ts): the
    // upstream's name in SSF_UPSTREAMS, its `sub` and its session id (`sid`, when it has one),
    // so that its back-channel logout ends exactly these. Null: not signed in through one.
    upstream: text("upstream"),
    upstreamSubject: text("upstream_subject"),
    upstreamSid: text("upstream_sid"),
    // The provider's own end of its session (the ID token's `session_expiry`): the session never
    // lives past it, however it slides (src/domain/upstreams/sign-in.ts). Null: it gave none.
    upstreamExpiresAt: integer("upstream_expires_at", { mode: "timestamp_ms" }),
    // The provider asked for a hold (a CAEP event, src/domain/upstreams/inbound.ts) about this instant:
    // with the session held, only its sign-in after it (its `auth_time`) lifts the hold, never
    // a local re-authentication. Null: no hold of the provider's.
    upstreamHeldAt: integer("upstream_held_at", { mode: "timestamp_ms" }),
    // SHA-256 (hex) of the report token's secret (src/services/report.ts): set only when the
    // session was created from a new device, so null says "not a new device" as well. The
    // token works until created_at + SESSION_REPORT_TTL_SECONDS, and once: confirming ends the row.
    reportHash: text("report_hash"),
    // The organization the session belongs to (src/domain/organizations/), set at creation and
    // never changed: its policy governs the session, its identity providers and its admin keys
    // reach it. Null: outside any organization, governed by the vars alone.
    organizationId: text("organization_id"),
  },
  (table) => [
    // "Live sessions of this user": equality on user_id, range on expires_at.
    index("sessions_user_id_expires_at_idx").on(table.userId, table.expiresAt),
    // The scheduled purge finds expired rows through it. Idle ones are refused and not listed
    // at once, and purged when they expire: an index on last_active_at would cost every
    // activity update a second row written.
    index("sessions_expires_at_idx").on(table.expiresAt),
    // An agent's open support sessions, to end them all (the agent left); only support rows have an entry.
    index("sessions_support_agent_idx").on(table.supportAgent).where(sql`${table.supportAgent} IS NOT NULL`),
    // An organization's sessions, to list, end or hold them all; only its members' rows have an entry.
    index("sessions_organization_id_idx")
      .on(table.organizationId, table.id)
      .where(sql`${table.organizationId} IS NOT NULL`),
  ],
);

export type SessionRow = typeof sessions.$inferSelect;

/** Event ids per millisecond: an event's id is at least its time times this (src/db/writes.ts `eventIds`). */
export const EVENT_IDS_PER_MS = 2048;

/** The least id an event logged at `at` (epoch ms) can have; ids stay exact in JavaScript until 2109. */
export function firstEventId(at: Date | number): number {
  return (typeof at === "number" ? at : at.getTime()) * EVENT_IDS_PER_MS;
}

/**
 * The security log: every session created or ended, and by what. Also the outbox of the
 * optional events queue: rows with `pending_delivery` still have to be sent. An event costs
 * two rows written: itself and its entry in the main index (a partial index's entry: one more).
 */
export const sessionEvents = sqliteTable(
  "session_events",
  {
    // The rowid, without AUTOINCREMENT (which writes sqlite_sequence on every insert): at least
    // firstEventId(created_at), and above every id before it. So the table itself is in
    // time order: the purge and a write's read-back of its own events seek it by id, no index.
    id: integer("id").primaryKey(),
    userId: text("user_id").notNull(),
    type: text("type", { enum: EVENT_TYPES }).notNull(),
    // The session created or ended.
    sessionId: text("session_id").notNull(),
    // Its bucket (computed, not stored): what the index leads with.
    bucket: text("bucket").generatedAlwaysAs(
      sql`substr(session_id, 1, length(session_id) - ${sql.raw(String(RANDOM_LENGTH))})`,
      {
        mode: "virtual",
      },
    ),
    // The session whose token made the request; null for sessions issued over RPC.
    actorSessionId: text("actor_session_id"),
    ipAddress: text("ip_address"),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    // The write operation that logged the event: a random id, the same on the retry of its
    // batch, which reads its own events back by (created_at, request_id), so a replay learns
    // what an attempt whose answer was lost did.
    requestId: text("request_id").notNull(),
    // Why: type `ended` and `ended_by_upstream`, why the session was ended (`context_changed` for
    // a context the policy ends); `context_changed`, the policy that applied (`log`, `hold`);
    // `reauthenticated`, `hold` when it lifted a hold. Null otherwise.
    reason: text("reason"),
    // The session's device (sessions.device_key), kept after the session row is gone.
    deviceKey: text("device_key").notNull(),
    // Type `created`: no session of the user seen within the retention period had this device.
    newDevice: integer("new_device", { mode: "boolean" }),
    // The session's NIST SP 800-63B AAL as the event leaves it (null: never given), and, for
    // `reauthenticated`, the one before: a change goes out as CAEP assurance-level-change.
    assuranceLevel: integer("assurance_level"),
    previousAssuranceLevel: integer("previous_assurance_level"),
    // Type `context_changed`, and `ended` for reason `context_changed`: where the session was
    // last seen and where it is used from now (src/db/client-context.ts).
    context: text("context", { mode: "json" }).$type<ContextChange>(),
    // The event's session is a support session: the agent acting in it (sessions.support_agent).
    supportAgent: text("support_agent"),
    // Written true only when the events queue is configured; false once the queue accepted it.
    pendingDelivery: integer("pending_delivery", { mode: "boolean" }).notNull().default(false),
    // The admin key whose call caused the event (src/domain/admin-keys.ts, its id); null for
    // every other entry point.
    adminKeyId: text("admin_key_id"),
    // Type `created` from a new device: its session's report_hash, kept after the row is gone,
    // so a report token that was used, or whose session ended otherwise, is still told from an
    // unknown one. Never listed, sent or signalled.
    reportHash: text("report_hash"),
    // The session's upstream sign-in (sessions.upstream, upstream_subject, upstream_sid), kept
    // after the row is gone: what a sign-out sent back to that upstream names it by. Null when
    // the session was not signed in through one.
    upstream: text("upstream"),
    upstreamSubject: text("upstream_subject"),
    upstreamSid: text("upstream_sid"),
    // The session's organization (sessions.organization_id), kept after the row is gone: an
    // organization's log is its members' events alone. Null: outside any organization.
    organizationId: text("organization_id"),
  },
  (table) => [
    // The main index: a user's log newest first (and "seen on this device") under its bucket,
    // and a bucket's events for a move (src/db/moves.ts). Session ids start with their bucket.
    index("session_events_bucket_user_id_created_at_idx").on(table.bucket, table.userId, table.createdAt),
    // The cron's resend finds the (few) undelivered rows without reading the log. Only
    // events written with the queue configured have an entry, until the queue accepts them.
    index("session_events_pending_idx").on(table.id).where(sql`${table.pendingDelivery} = 1`),
    // A report token's `created` event by its session id (src/db/report.ts), once the row is
    // gone: only a new device's `created` has an entry, so other events write no more rows.
    index("session_events_report_idx").on(table.sessionId).where(sql`${table.reportHash} IS NOT NULL`),
  ],
);

export type SessionEventRow = typeof sessionEvents.$inferSelect;

/**
 * The directory of organizations (docs/organizations.md): each enterprise customer, with its own
 * identity providers, session policy and admin keys. On the database bound as DB only.
 */
export const organizations = sqliteTable("organizations", {
  // `org_` and 22 random characters (src/domain/organizations/organization.ts): stable, never reused.
  id: text("id").primaryKey(),
  // What the product calls the customer, for its admins and the devices page.
  name: text("name").notNull(),
  createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
  updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
});

export type OrganizationRow = typeof organizations.$inferSelect;

/**
 * An organization's session policy, on every database that holds sessions (and DB): read in the
 * same statements as its members' sessions, so a policy costs no round trip, and a row here is
 * what lets a session be created in the organization. Written to every database with the
 * directory entry; removed with it.
 */
export const organizationPolicies = sqliteTable("organization_policies", {
  organizationId: text("organization_id").primaryKey(),
  updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
  // Each a session setting's var (src/domain/organizations/policy.ts): null, the var's value.
  // Lifetime, idle timeout, sliding, maximum lifetime and step-up also govern live sessions (src/db/liveness.ts),
  // the context and travel settings every judged request (src/db/client-context.ts).
  ttlSeconds: integer("ttl_seconds"),
  idleTimeoutSeconds: integer("idle_timeout_seconds"),
  slidingTtl: integer("sliding_ttl", { mode: "boolean" }),
  maxLifetimeSeconds: integer("max_lifetime_seconds"),
  maxPerUser: integer("max_per_user"),
  stepUpMaxAgeSeconds: integer("step_up_max_age_seconds"),
  contextDevice: text("context_device", { enum: ACTIONS }),
  contextNetwork: text("context_network", { enum: ACTIONS }),
  contextTravel: text("context_travel", { enum: ACTIONS }),
  travelMaxKmh: integer("travel_max_kmh"),
  travelMinKm: integer("travel_min_km"),
  reportTtlSeconds: integer("report_ttl_seconds"),
});

export type OrganizationPolicyRow = typeof organizationPolicies.$inferSelect;

/**
 * The identity providers organizations register at runtime (docs/organization-providers.md), on
 * the database bound as DB only: each is an SSF_UPSTREAMS entry of one organization, read by its
 * name when one of its routes, a sign-in or a push names it, and kept per isolate for a bound.
 */
export const organizationProviders = sqliteTable(
  "organization_providers",
  {
    // Unique across the deployment and apart from SSF_UPSTREAMS' names: sessions.upstream, the
    // links and the reason `<name>:<event>` name it.
    name: text("name").primaryKey(),
    organizationId: text("organization_id").notNull(),
    // The entry as SSF_UPSTREAMS would hold it, validated by the var's own rules; never its push's Authorization.
    config: text("config").notNull(),
    // The push's Authorization as a compact JWE (dir, A256GCM) under ORGANIZATION_SECRETS_KEYS; null: none.
    authorization: text("authorization"),
    // False: kept, but it acts on nothing and no sign-in may name it.
    enabled: integer("enabled", { mode: "boolean" }).notNull(),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
  },
  (table) => [
    // An organization's providers, to list them.
    index("organization_providers_organization_id_idx").on(table.organizationId, table.name),
  ],
);

export type OrganizationProviderRow = typeof organizationProviders.$inferSelect;

// The one list of a bucket's move states (src/db/moves.ts). `frozen`: on the database that
// holds the bucket, while it is copied to `binding`; nothing of the bucket is written here.
// `moved`: the bucket is on `binding`; nothing of it is here, ask there.
export const MOVE_STATES = ["frozen", "moved"] as const;
export type MoveState = (typeof MOVE_STATES)[number];

/**
 * Buckets being moved between databases, on the databases concerned; empty otherwise. Every
 * request's batch reads its bucket's row and every write is guarded by it, in the same
 * transaction, so a move takes effect between two requests, never during one.
 */
export const bucketMoves = sqliteTable("bucket_moves", {
  // The bucket as the prefix its session ids start with: `<bucket>` or `<region><bucket>`
  // (src/domain/token.ts), so a row's bucket is its id without the 22 random characters.
  bucket: text("bucket").primaryKey(),
  state: text("state", { enum: MOVE_STATES }).notNull(),
  binding: text("binding").notNull(),
  updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
});

export type BucketMoveRow = typeof bucketMoves.$inferSelect;

// Shared Signals (docs/shared-signals.md). What is sent: receivers, their streams and the SETs
// waiting for them live in the database bound as DB (src/db/ssf/). What is taken in:
// inbound SETs from upstreams are remembered in the database of the user they ended sessions
// of, written in the same batch as the ending (src/db/upstreams/inbound-sets.ts).

/** A receiver's credential: the operator issues and revokes it (`npm run ssf:receivers`). */
// When each admin key (src/domain/admin-keys.ts, kept in the secret ADMIN_KEYS) was last used,
// for `npm run admin:keys -- list`: written after a call's answer, at most once a minute per key
// and isolate (src/services/admin-key-uses.ts), on the streams' database.
export const adminKeyUses = sqliteTable("admin_key_uses", {
  keyId: text("key_id").primaryKey(),
  lastUsedAt: integer("last_used_at", { mode: "timestamp_ms" }).notNull(),
});

export const ssfReceivers = sqliteTable("ssf_receivers", {
  id: text("id").primaryKey(),
  // What the operator called it, for the list; never shown to a receiver.
  name: text("name").notNull(),
  // The `aud` of its streams and of every SET they carry.
  audience: text("audience").notNull(),
  // SHA-256 (hex) of the credential's secret half, as for session tokens.
  secretHash: text("secret_hash").notNull(),
  createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
  // Set by `ssf:receivers revoke`: the credential is refused and its streams are disabled.
  revokedAt: integer("revoked_at", { mode: "timestamp_ms" }),
});

export const ssfStreams = sqliteTable(
  "ssf_streams",
  {
    id: text("id").primaryKey(),
    receiverId: text("receiver_id").notNull(),
    // Event type URIs as the receiver asked (kept, even the ones not supported) and as delivered.
    eventsRequested: text("events_requested", { mode: "json" }).$type<string[]>().notNull(),
    eventsDelivered: text("events_delivered", { mode: "json" }).$type<string[]>().notNull(),
    deliveryMethod: text("delivery_method", { enum: DELIVERY_METHODS }).notNull(),
    // Push only: where SETs are POSTed and the Authorization value sent with them (a secret).
    endpointUrl: text("endpoint_url"),
    authorizationHeader: text("authorization_header"),
    description: text("description"),
    status: text("status", { enum: STATUSES }).notNull(),
    reason: text("reason"),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
    // The last verification the receiver asked for: min_verification_interval counts from it.
    verificationRequestedAt: integer("verification_requested_at", { mode: "timestamp_ms" }),
  },
  (table) => [index("ssf_streams_receiver_id_idx").on(table.receiverId)],
);

export type StreamRow = typeof ssfStreams.$inferSelect;

/**
 * Subjects a receiver added (included) or removed (not) from a stream. A stream with no
 * included subject carries every user but the removed ones; once one is added, only those.
 */
export const ssfStreamSubjects = sqliteTable(
  "ssf_stream_subjects",
  {
    streamId: text("stream_id").notNull(),
    userId: text("user_id").notNull(),
    included: integer("included", { mode: "boolean" }).notNull(),
  },
  (table) => [primaryKey({ columns: [table.streamId, table.userId] })],
);

/**
 * SETs waiting for their stream: polled and acknowledged, or pushed, then deleted. The claims
 * are stored unsigned and signed when sent, so a key rotation applies to what still waits;
 * `jti` starts with the event's time, so the primary key keeps each stream in time order.
 */
export const ssfQueuedSets = sqliteTable(
  "ssf_queued_sets",
  {
    streamId: text("stream_id").notNull(),
    jti: text("jti").notNull(),
    claims: text("claims", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    // Push: failed attempts so far and when the next may start. While a round holds the SET,
    // the next attempt is when its lease runs out.
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at", { mode: "timestamp_ms" }).notNull(),
    // The push round that last leased the SET (src/db/ssf/queue.ts `leaseDuePushes`): only it
    // records how its push went.
    leasedBy: text("leased_by"),
  },
  (table) => [primaryKey({ columns: [table.streamId, table.jti] })],
);

export type QueuedSetRow = typeof ssfQueuedSets.$inferSelect;

/** Inbound SETs: what an upstream sent and this service acted on, so that a resend is a no-op. */
export const ssfReceivedSets = sqliteTable(
  "ssf_received_sets",
  {
    issuer: text("issuer").notNull(),
    jti: text("jti").notNull(),
    receivedAt: integer("received_at", { mode: "timestamp_ms" }).notNull(),
    // The bucket of the user it named: a move takes the SET along with the user's sessions
    // (src/db/moves.ts), so that one resent after the move still ends nothing.
    bucket: text("bucket").notNull(),
    // A logout token's or a revocation's `jti` is also recorded for the subject of its first
    // request, where the `jti` hashes to (src/db/upstreams/inbound-sets.ts `recordJtiFor`), so it
    // acts for one subject on any database: null on every other row.
    subject: text("subject"),
  },
  (table) => [primaryKey({ columns: [table.issuer, table.jti] })],
);

/**
 * Which user an upstream's subject is (src/db/upstreams/links.ts): written by a session's
 * creation with an upstream sign-in, read by that upstream's logout and revocation, which
 * name the subject and not the user. A row lives in the bucket its (upstream, subject) hashes
 * to in the upstream's region, like a user's rows, and moves with that bucket. One row per
 * subject ever signed in (about 100 bytes), rewritten only when the subject's user changes
 * (then once more, when the user it was moved from has no session of it left).
 */
export const upstreamLinks = sqliteTable(
  "upstream_links",
  {
    upstream: text("upstream").notNull(),
    subject: text("subject").notNull(),
    userId: text("user_id").notNull(),
    // The user's home region, as create was given it: where the user's sessions are.
    region: text("region"),
    bucket: text("bucket").notNull(),
    // The user (and region) a sign-in moved the link from, until that user's sessions signed
    // in as the subject have ended: a replay of the link's write, or the login flow's retry of a
    // sign-in that failed before they ended, reads it and ends them (src/services/upstreams/links.ts).
    previousUserId: text("previous_user_id"),
    previousRegion: text("previous_region"),
  },
  (table) => [
    primaryKey({ columns: [table.upstream, table.subject] }),
    // A move reads its bucket's links at once; a link is written about once per subject.
    index("upstream_links_bucket_idx").on(table.bucket),
  ],
);
