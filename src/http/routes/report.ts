import type { Context } from "hono";
import { sessionName } from "../../domain/device.ts";
import { endReportedSession, type ReportedSession, reportedSignIn } from "../../services/report.ts";
import { bearerToken } from "../credentials.ts";
import { unauthorized } from "../errors.ts";
import { Hono } from "../hono.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { reportRefused } from "../refusals.ts";

/** What GET /auth/report shows of the sign-in its token names: a live session. */
export interface ReportView {
  session_id: string;
  name: string;
  ip_address: string;
  location: string | null;
  device: Pick<ReportedSession, "browser" | "os"> & { type: ReportedSession["deviceType"] };
  created_at: string;
  last_active_at: string;
}

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
    const view: ReportView = {
      session_id: reported.id,
      name: sessionName(reported, reported.ipAddress),
      ip_address: reported.ipAddress ?? "",
      location: [reported.city, reported.country].filter(Boolean).join(", ") || null,
      device: { browser: reported.browser, os: reported.os, type: reported.deviceType },
      created_at: reported.createdAt.toISOString(),
      last_active_at: reported.lastActiveAt.toISOString(),
    };
    return c.json(view);
  })
  .post("/", async (c) => {
    const ended = await endReportedSession(c.var.scope, reportToken(c));
    if (ended !== "ended") throw reportRefused(ended);
    return c.json({ ended: true, next_steps: NEXT_STEPS });
  });
