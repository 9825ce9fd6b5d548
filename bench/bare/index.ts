// The benchmark's baseline (`npm run bench`): a bare Hono worker, no middleware. `GET /` is the
// baseline every row is divided by; `GET /d1` adds one D1 round trip that reads no table, the
// floor of any answer that needs the database, to tell the service's costs from the platform's;
// `POST /batch` runs the statements it is sent as one batch (the service's list, replayed), to
// tell an operation's SQL from the service's work around it; `POST /batch?bytes=N` answers N bytes
// as well, made once: what an answer's size alone costs on this harness; `POST /batch?sign` also
// signs an access token as `POST /auth/token` does, with the service's own signing function: what
// the token's signature alone costs.
import { Hono } from "hono";
import { signJws } from "../../src/domain/jws.ts";
import { base64Url } from "../../src/domain/token.ts";

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

// An ES256 key made once per isolate, as a private JWK: the service signs with its configured one.
let signer: Promise<JsonWebKey & { kid: string }> | undefined;

async function newSigner(): Promise<JsonWebKey & { kid: string }> {
  const { privateKey } = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
    "verify",
  ])) as CryptoKeyPair;
  return { ...((await crypto.subtle.exportKey("jwk", privateKey)) as JsonWebKey), kid: "bench" };
}

/** A token with the claims `signAccessToken` (src/domain/access-token.ts) sets for a session without factors or data. */
async function accessToken(): Promise<string> {
  const iat = Math.floor(Date.now() / 1000);
  const claims = {
    iss: "https://sessions.bench.example",
    sub: "bench-user",
    aud: "https://api.bench.example",
    exp: iat + 120,
    iat,
    jti: base64Url(crypto.getRandomValues(new Uint8Array(16))),
    sid: base64Url(crypto.getRandomValues(new Uint8Array(18))),
    auth_time: iat,
  };
  signer ??= newSigner();
  return signJws(claims, await signer, { typ: "at+jwt" });
}

export default new Hono<{ Bindings: { DB: D1Database } }>()
  .get("/", (c) => c.text("ok"))
  .get("/d1", async (c) => c.json(await c.env.DB.prepare("SELECT 1 AS one").first()))
  .post("/batch", async (c) => {
    const statements = await c.req.json<{ sql: string; params: unknown[] }[]>();
    const results = await c.env.DB.batch(statements.map(({ sql, params }) => c.env.DB.prepare(sql).bind(...params)));
    const bytes = Number(c.req.query("bytes") ?? 0);
    if (bytes > 0) return c.body(answerOf(bytes), 200, { "Content-Type": "application/json" });
    if (c.req.query("sign") !== undefined)
      return c.json({ access_token: await accessToken(), token_type: "Bearer", expires_in: 120 });
    return c.json(results.length);
  });
