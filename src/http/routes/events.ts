import { EVENTS_LISTED } from "../../domain/events.ts";
import { isRefusal } from "../../domain/refusal.ts";
import { parsedText } from "../../domain/session-view.ts";
import { listOwnEvents } from "../../services/own-sessions.ts";
import { ok, ref } from "../openapi-parts.ts";
import { refused } from "../refusals.ts";
import { declare, TOKEN } from "../route.ts";

/** The caller's security log: sessions created and ended, newest first, bounded. */
export const EVENTS_ROUTES = [
  declare({
    method: "get",
    path: "/auth/events",
    credential: TOKEN,
    operationId: "listEvents",
    summary: "The security log of the caller's user: sessions created and ended, newest first",
    answers: {
      "200": ok(
        `At most ${EVENTS_LISTED} events, newest \`created_at\` first, ties by \`id\` descending.`,
        ref("schemas/EventList"),
      ),
    },
    handler: async (c) => {
      const events = await listOwnEvents(c.var.scope, c.var.token);
      if (isRefusal(events)) throw refused(c, events);
      // Parsed and written again, unlike the sessions' list: a context change's numbers are as SQLite
      // wrote them into the row (`4760.0`), and the log has always shown them as JavaScript writes them.
      return c.json({ events: parsedText(events) });
    },
  }),
] as const;
