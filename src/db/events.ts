import { and, desc, eq, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import type { EventView } from "../domain/event-view.ts";
import { EVENTS_LISTED } from "../domain/events.ts";
import type { JsonText } from "../domain/session-view.ts";
import { authenticated, type ByToken, callerAndMove, type Head } from "./authenticated.ts";
import { onBucket } from "./buckets.ts";
import type { Database } from "./client.ts";
import type { ContextCheck } from "./client-context.ts";
import { batchCompiled, compiled } from "./compiled.ts";
import { EVENT_VIEW } from "./event-view.ts";
import { type Caller, ownerOf, type TokenProof } from "./liveness.ts";
import { sessionEvents } from "./schema.ts";
import { arrayText, joinedViews } from "./session-view.ts";
import type { BucketShard } from "./shards.ts";
import { type Logged, newWrite, type Writer } from "./writes.ts";

/** A user's events, through the one index: under the user's bucket (src/db/schema.ts `bucket`). */
export function eventsOf(bucket: string | SQLWrapper, userId: string | SQLWrapper): SQL | undefined {
  return and(eq(sessionEvents.bucket, bucket), eq(sessionEvents.userId, userId));
}

/**
 * The newest events of the caller's user, each written as the log shows it (./event-view.ts),
 * gathered in one value; compiled, as the head is (`authenticated(…).also`).
 */
function eventList(db: Database, { token }: Head) {
  const recent = db
    .select({
      view: EVENT_VIEW.as("view"),
      createdAt: sessionEvents.createdAt,
      id: sessionEvents.id,
    })
    .from(sessionEvents)
    .where(eventsOf(sql.placeholder("bucket"), ownerOf(token.proof, token.at)))
    .orderBy(desc(sessionEvents.createdAt), desc(sessionEvents.id))
    .limit(EVENTS_LISTED)
    .as("recent");
  return db
    .select({
      list: joinedViews(recent.view, sql`${recent.createdAt} DESC, ${recent.id} DESC`).as("list"),
    })
    .from(recent);
}
const EVENT_LIST = compiled(eventList);

/**
 * The caller's user's security log, newest first, after judging the caller's context; caller
 * null when the token is not live, no event when it is held.
 */
export async function listEvents(
  shard: BucketShard,
  proof: TokenProof,
  at: Instant,
  check: ContextCheck | null,
  writer: Writer,
): Promise<Logged<{ caller: Caller | null; events: JsonText<EventView[]> }>> {
  const token: ByToken = { proof, at, check, writer, write: newWrite(at.now) };
  return onBucket(shard, async (db) => {
    const head = authenticated(db, token, true);
    const { contextEvents, read, events } = await batchCompiled(db, {
      ...head.statements(),
      read: head.callerRow(shard.bucket),
      events: head.also(EVENT_LIST, { bucket: shard.bucket }),
    });
    const { caller, move } = callerAndMove(read[0]);
    const answer = { caller, events: arrayText<EventView>(events[0]?.list) };
    return {
      answer: { answer, events: head.events(contextEvents), db },
      move,
      blocked: caller?.contextUnrecorded === true,
    };
  });
}
