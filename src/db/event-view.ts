import { sql } from "drizzle-orm";
import { sessionEvents } from "./schema.ts";
import { isoTime, rendered } from "./session-view.ts";

// An event of the security log as GET /auth/events shows it (`EventView`), written by SQLite as
// JSON text in the log's own statement, as the list's sessions are (./session-view.ts).

/** A stored boolean (0, 1, null) as a JSON value. */
const bool = (column: typeof sessionEvents.newDevice) =>
  sql`CASE ${column} WHEN 1 THEN json('true') WHEN 0 THEN json('false') END`;

/** The event as the log shows it. */
export const EVENT_VIEW = rendered(
  sql`'id', ${sessionEvents.id},
  'type', ${sessionEvents.type},
  'session_id', ${sessionEvents.sessionId},
  'actor_session_id', ${sessionEvents.actorSessionId},
  'ip_address', ${sessionEvents.ipAddress},
  'created_at', ${isoTime(sessionEvents.createdAt)},
  'reason', ${sessionEvents.reason},
  'new_device', ${bool(sessionEvents.newDevice)},
  'context', json(${sessionEvents.context}),
  'actor', json_object('sub', ${sessionEvents.supportAgent}),
  'admin_key_id', ${sessionEvents.adminKeyId}`,
  [
    ["context", sql`${sessionEvents.context} IS NOT NULL`],
    ["actor", sql`${sessionEvents.supportAgent} IS NOT NULL`],
    ["admin_key_id", sql`${sessionEvents.adminKeyId} IS NOT NULL`],
  ],
);
