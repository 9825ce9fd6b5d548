import { isRefusal } from "../../domain/refusal.ts";
import { parsedText } from "../../domain/session-view.ts";
import { listOwnEvents } from "../../services/own-sessions.ts";
import { Hono } from "../hono.ts";
import { requireToken } from "../middleware/auth.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { refused } from "../refusals.ts";

/** The caller's security log: sessions created and ended, newest first, bounded. */
export const eventsRoutes = new Hono<ScopedEnv>().get("/", requireToken, async (c) => {
  const events = await listOwnEvents(c.var.scope, c.var.token);
  if (isRefusal(events)) throw refused(c, events);
  // Parsed and written again, unlike the sessions' list: a context change's numbers are as SQLite
  // wrote them into the row (`4760.0`), and the log has always shown them as JavaScript writes them.
  return c.json({ events: parsedText(events) });
});
