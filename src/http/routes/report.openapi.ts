import {
  AUTH_ERRORS,
  CHALLENGE,
  error,
  METHOD_NOT_ALLOWED,
  ok,
  type PathItem,
  RATE_LIMITED,
  ref,
} from "../openapi-parts.ts";
import { NEXT_STEPS } from "./report.ts";

const SECURITY = [{ reportToken: [] }];

const REFUSALS = {
  "401": error("No `Authorization: Bearer` report token at all.", ["token_required"], CHALLENGE),
  "404": error("Malformed or never issued (a session token too).", ["report_not_found"]),
  "410": error(
    "Used already, expired (SESSION_REPORT_TTL_SECONDS), or its session ended some other way. Nothing ended.",
    ["report_used", "report_expired", "session_ended"],
  ),
  ...RATE_LIMITED,
  ...AUTH_ERRORS,
};

/** The OpenAPI document's part (src/http/openapi.ts) for report.ts: GET and POST /auth/report. */
export const reportPaths = {
  "/auth/report": {
    get: {
      operationId: "readReport",
      summary: "What the sign-in a new-device report token names was; changes nothing",
      description:
        'For the product\'s "Was this you?" page, whose link carries the report token in its fragment. A read only: a mail scanner fetching the link ends nothing. One database round trip.',
      security: SECURITY,
      responses: {
        "200": ok("The sign-in, still live.", ref("schemas/ReportedSignIn")),
        ...REFUSALS,
      },
    },
    post: {
      operationId: "confirmReport",
      summary: '"This wasn\'t me": ends the sign-in the report token names',
      description: "Logged `ended`, reason `reported_by_user`; no other session ends, no body is read.",
      security: SECURITY,
      responses: {
        "200": ok("Ended; what the product should offer next.", {
          type: "object",
          required: ["ended", "next_steps"],
          properties: {
            ended: { const: true },
            next_steps: { type: "array", items: { enum: [...NEXT_STEPS] } },
          },
          additionalProperties: false,
        }),
        ...REFUSALS,
      },
    },
    "x-other-methods": METHOD_NOT_ALLOWED,
  },
} as const satisfies Record<string, PathItem>;

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
