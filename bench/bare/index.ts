// The benchmark's baseline (`npm run bench`): a bare Hono worker, no middleware. `GET /` is the
// baseline every row is divided by; `GET /d1` adds one D1 round trip that reads no table, the
// floor of any answer that needs the database, to tell the service's costs from the platform's;
// `POST /batch` runs the statements it is sent as one batch (the service's list, replayed), to
// tell an operation's SQL from the service's work around it; `POST /batch?bytes=N` answers N bytes
// as well, made once: what an answer's size alone costs on this harness; `POST /batch?sign` also
// signs an access token as `POST /auth/token` does (its `signAccessToken`, the run's key set):
// what the token's signature alone costs.
import { Hono } from "hono";
import {
  type AccessTokenIssuer,
  type AccessTokenSubject,
  type AccessTokenVars,
  readAccessTokenIssuer,
  signAccessToken,
} from "../../src/domain/access-token.ts";

const answers = new Map<number, string>();

/** A JSON string of exactly `bytes` bytes, made once per size. */
function answerOf(bytes: number): string {
  let answer = answers.get(bytes);
  if (answer === undefined) {
    answer = JSON.stringify("x".repeat(bytes - 2));
    answers.set(bytes, answer);
  }
  return answer;
}

/** A session without factors, data, actor or organization, as the bench's sessions are. */
const SUBJECT: AccessTokenSubject = {
  organization: null,
  sessionId: "bench-session",
  userId: "bench-user",
  expiresAt: "2099-01-01T00:00:00.000Z",
  authenticatedAt: "2026-01-01T00:00:00.000Z",
  factors: [],
  assuranceLevel: null,
};

export default new Hono<{ Bindings: { DB: D1Database } & AccessTokenVars }>()
  .get("/", (c) => c.text("ok"))
  .get("/d1", async (c) => c.json(await c.env.DB.prepare("SELECT 1 AS one").first()))
  .post("/batch", async (c) => {
    const statements = await c.req.json<{ sql: string; params: unknown[] }[]>();
    const results = await c.env.DB.batch(statements.map(({ sql, params }) => c.env.DB.prepare(sql).bind(...params)));
    const bytes = Number(c.req.query("bytes") ?? 0);
    if (bytes > 0) return c.body(answerOf(bytes), 200, { "Content-Type": "application/json" });
    if (c.req.query("sign") !== undefined) {
      const minted = await signAccessToken(readAccessTokenIssuer(c.env) as AccessTokenIssuer, SUBJECT, new Date());
      return c.json({ access_token: minted.token, token_type: "Bearer", expires_in: minted.expiresIn });
    }
    return c.json(results.length);
  });
