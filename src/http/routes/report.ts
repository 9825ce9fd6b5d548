import { createMiddleware } from "hono/factory";
import type { SessionView } from "../../domain/session-view.ts";
import { endReportedSession, reportedSignIn } from "../../services/report.ts";
import { bearerToken } from "../credentials.ts";
import { unauthorized } from "../errors.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { AUTH_ERRORS, CHALLENGE, error, METHOD_NOT_ALLOWED, ok, RATE_LIMITED, ref } from "../openapi-parts.ts";
import { reportRefused } from "../refusals.ts";
import { AUTH, type Credential, declare } from "../route.ts";

/** What GET /auth/report shows of the sign-in its token names (a live session): as the list shows it. */
type ReportView = { session_id: string } & Pick<
  SessionView,
  "name" | "ip_address" | "location" | "device" | "created_at" | "last_active_at"
>;

/** What the user can do once the stranger's session ended: the product links each to its page. */
export const NEXT_STEPS = ["change_password", "review_devices"] as const;

type ReportEnv = ScopedEnv & { Variables: { reportToken: string } };

/**
 * The report token, from `Authorization: Bearer` only: never the URL (the message's link
 * carries it in the fragment, which no server sees), never the session cookie.
 */
const requireReportToken = createMiddleware<ReportEnv>(async (c, next) => {
  const token = bearerToken(c);
  if (!token) throw unauthorized("token_required", false);
  c.set("reportToken", token);
  await next();
});

/** The report token (`requireReportToken`): every refusal of it, and the database's. */
const REPORT_TOKEN: Credential<ReportEnv> = {
  security: [{ reportToken: [] }],
  mount: AUTH,
  use: [requireReportToken],
  answers: {
    "401": error("No `Authorization: Bearer` report token at all.", ["token_required"], CHALLENGE),
    "404": error("Malformed or never issued (a session token too).", ["report_not_found"]),
    "410": error(
      "Used already, expired (SESSION_REPORT_TTL_SECONDS), or its session ended some other way. Nothing ended.",
      ["report_used", "report_expired", "session_ended"],
    ),
    ...RATE_LIMITED,
    ...AUTH_ERRORS,
  },
  otherMethods: METHOD_NOT_ALLOWED,
};

// "Was this you?" (src/services/report.ts). A GET, which a mail scanner may send, only reads;
// the POST ends. Neither reads a body.
export const REPORT_ROUTES = [
  declare({
    method: "get",
    path: "/auth/report",
    credential: REPORT_TOKEN,
    operationId: "readReport",
    summary: "What the sign-in a new-device report token names was; changes nothing",
    description:
      'For the product\'s "Was this you?" page, whose link carries the report token in its fragment. A read only: a mail scanner fetching the link ends nothing. One database round trip.',
    answers: { "200": ok("The sign-in, still live.", ref("schemas/ReportedSignIn")) },
    handler: async (c) => {
      const reported = await reportedSignIn(c.var.scope, c.var.reportToken);
      if (typeof reported === "string") throw reportRefused(reported);
      const { id, name, ip_address, location, device, created_at, last_active_at } = reported.view;
      const view: ReportView = { session_id: id, name, ip_address, location, device, created_at, last_active_at };
      return c.json(view);
    },
  }),
  declare({
    method: "post",
    path: "/auth/report",
    credential: REPORT_TOKEN,
    operationId: "confirmReport",
    summary: '"This wasn\'t me": ends the sign-in the report token names',
    description: "Logged `ended`, reason `reported_by_user`; no other session ends, no body is read.",
    answers: {
      "200": ok("Ended; what the product should offer next.", {
        type: "object",
        required: ["ended", "next_steps"],
        properties: {
          ended: { const: true },
          next_steps: { type: "array", items: { enum: [...NEXT_STEPS] } },
        },
        additionalProperties: false,
      }),
    },
    handler: async (c) => {
      const ended = await endReportedSession(c.var.scope, c.var.reportToken);
      if (ended !== "ended") throw reportRefused(ended);
      return c.json({ ended: true, next_steps: NEXT_STEPS });
    },
  }),
] as const;

/** GET /auth/report's answer, a component so that generated clients name its type. */
export const reportedSignInSchema = {
  type: "object",
  required: ["session_id", "name", "ip_address", "location", "device", "created_at", "last_active_at"],
  properties: {
    session_id: ref("schemas/SessionId"),
    name: { type: "string" },
    ip_address: { type: "string" },
    location: { type: ["string", "null"] },
    device: ref("schemas/Device"),
    created_at: ref("schemas/Timestamp"),
    last_active_at: ref("schemas/Timestamp"),
  },
  additionalProperties: false,
} as const;
