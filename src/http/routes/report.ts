import type { Context } from "hono";
import type { SessionView } from "../../domain/session-view.ts";
import { endReportedSession, reportedSignIn } from "../../services/report.ts";
import { bearerToken } from "../credentials.ts";
import { unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { reportRefused } from "../refusals.ts";

/** What GET /auth/report shows of the sign-in its token names (a live session): as the list shows it. */
type ReportView = { session_id: string } & Pick<
  SessionView,
  "name" | "ip_address" | "location" | "device" | "created_at" | "last_active_at"
>;

/** What the user can do once the stranger's session ended: the product links each to its page. */
export const NEXT_STEPS = ["change_password", "review_devices"] as const;

/**
 * The report token, from `Authorization: Bearer` only: never the URL (the message's link
 * carries it in the fragment, which no server sees), never the session cookie.
 */
function reportToken(c: Context): string {
  const token = bearerToken(c);
  if (!token) throw unauthorized("token_required", false);
  return token;
}

// "Was this you?" (src/services/report.ts). A GET, which a mail scanner may send, only reads;
// the POST ends. Neither reads a body.
export const reportRoutes = new Hono<ScopedEnv>()
  .get("/", async (c) => {
    const reported = await reportedSignIn(c.var.scope, reportToken(c));
    if (typeof reported === "string") throw reportRefused(reported);
    const { id, name, ip_address, location, device, created_at, last_active_at } = reported.view;
    const view: ReportView = { session_id: id, name, ip_address, location, device, created_at, last_active_at };
    return c.json(view);
  })
  .post("/", async (c) => {
    const ended = await endReportedSession(c.var.scope, reportToken(c));
    if (ended !== "ended") throw reportRefused(ended);
    return c.json({ ended: true, next_steps: NEXT_STEPS });
  });
