import { and, inArray, isNotNull, isNull, not, or, type SQL, sql } from "drizzle-orm";
import { type ClientContext, type ContextPolicies, type ContextPolicy, sameDevice } from "../domain/client-context.ts";
import type { Instant } from "../domain/clock.ts";
import { notMoving } from "./buckets.ts";
import type { Database } from "./client.ts";
import { isProvenBy, type TokenProof } from "./liveness.ts";
import { sessions } from "./schema.ts";
import { type Actor, endSessions, recordEvents, type Write } from "./writes.ts";

// The session context check (src/domain/client-context.ts) as statements at the head of an
// operation's batch: the statements after them see the session as the check left it (ended,
// or held for step-up), so the check costs no round trip of its own.

/** The caller's context and what a change of it does; null: the context is unknown, nothing is checked. */
export interface ContextCheck {
  context: ClientContext;
  policies: ContextPolicies;
}

const NOTHING = sql`0`;
const UNKNOWN: ClientContext = { browser: "", os: "", country: null, asn: null };

/** The browser family and OS last seen are not the caller's device (unknown on a session that has none recorded). */
function deviceChanged(context: ClientContext): SQL {
  const same = sameDevice(context).map(
    ([browser, os]) => sql`(${sessions.seenBrowser} = ${browser} AND ${sessions.seenOs} = ${os})`,
  );
  return sql`(${sessions.seenBrowser} IS NOT NULL AND NOT (${sql.join(same, sql` OR `)}))`;
}

/** The ASN and the country both differ from the last seen, all four known. */
function networkChanged({ country, asn }: ClientContext): SQL {
  if (country === null || asn === null) return NOTHING;
  return sql`(${sessions.seenCountry} != ${country} AND ${sessions.seenAsn} != ${asn})`;
}

/** A change of a kind whose policy is one of `policies`. */
function changedUnder(check: ContextCheck | null, ...policies: ContextPolicy[]): SQL {
  if (!check) return NOTHING;
  const kinds = [
    policies.includes(check.policies.device) ? deviceChanged(check.context) : undefined,
    policies.includes(check.policies.network) ? networkChanged(check.context) : undefined,
  ];
  return or(...kinds) ?? NOTHING;
}

/** The session's last seen context and the caller's, for the event (the after keeps what the caller did not tell). */
function contextChange({ browser, os, country, asn }: ClientContext): SQL {
  const { seenBrowser, seenOs, seenCountry, seenAsn } = sessions;
  return sql`json_object('before', json_object('browser', nullif(${seenBrowser}, ''), 'os', nullif(${seenOs}, ''), 'country', ${seenCountry}, 'asn', ${seenAsn}), 'after', json_object('browser', ${browser || null}, 'os', ${os || null}, 'country', coalesce(${country}, ${seenCountry}), 'asn', coalesce(${asn}, ${seenAsn})))`;
}

/**
 * Judges the token's session by the caller's context, when it is a browser's session (carrier
 * `cookie` or `both`) used through its cookie or by an RPC caller that gave the browser's context:
 * a change under `end` ends it (`ended`, reason `context_changed`), under `log` or `step-up` logs
 * `context_changed` with the policy as its reason (and under `step-up` holds the session), and
 * any difference is recorded as where it was last seen. A Bearer call is never judged nor
 * recorded: an app or a backend calls from wherever it runs, and must not move what the
 * browser is judged against. Device-bound sessions are not judged, their key proves the device;
 * where they were seen is still recorded. Five statements, whatever the check; with none they change nothing. The
 * last reads whether a change is still unrecorded: only when the bucket is frozen for a move
 * (the writes are held back), and then the operation must not answer as if it were not there.
 */
export function checkContext(
  db: Database,
  proof: TokenProof,
  at: Instant,
  requested: ContextCheck | null,
  actor: Actor,
  write: Write,
) {
  const check = proof.carrier === "bearer" ? null : requested;
  const proven = isProvenBy(proof, at);
  const browsers = and(
    proven,
    or(inArray(sessions.carrier, ["cookie", "both"]), isNotNull(sessions.dbscKeyThumbprint)),
  );
  const judged = and(browsers, isNull(sessions.dbscKeyThumbprint));
  const ending = and(judged, changedUnder(check, "end"));
  const logging = and(judged, not(changedUnder(check, "end")), changedUnder(check, "log", "step-up"));
  // Without a check every condition is false: the values are never written.
  const context = check?.context ?? UNKNOWN;
  const change = contextChange(context);
  const differs = check
    ? or(
        sql`${sessions.seenBrowser} IS NOT ${context.browser}`,
        sql`${sessions.seenOs} IS NOT ${context.os}`,
        context.country === null ? undefined : sql`${sessions.seenCountry} IS NOT ${context.country}`,
        context.asn === null ? undefined : sql`${sessions.seenAsn} IS NOT ${context.asn}`,
      )
    : NOTHING;
  return [
    recordEvents(db, "ended", ending, actor, write, { reason: "context_changed", context: change }),
    recordEvents(db, "context_changed", logging, actor, write, {
      // The policy that applied: a receiver is told of a session held for step-up (src/services/ssf/delivery.ts).
      reason: sql<string>`CASE WHEN ${changedUnder(check, "step-up")} THEN 'step-up' ELSE 'log' END`,
      context: change,
    }),
    endSessions(db, ending),
    db
      .update(sessions)
      .set({
        seenBrowser: context.browser,
        seenOs: context.os,
        seenCountry: sql`coalesce(${context.country}, ${sessions.seenCountry})`,
        seenAsn: sql`coalesce(${context.asn}, ${sessions.seenAsn})`,
        // SET reads the row as it was: the change is judged against the context before this one.
        contextStepUp: sql`${sessions.contextStepUp} OR (${sessions.dbscKeyThumbprint} IS NULL AND ${changedUnder(check, "step-up")})`,
      })
      .where(and(browsers, differs, notMoving(db))),
    db.select({ id: sessions.id }).from(sessions).where(and(browsers, differs)),
  ] as const;
}
