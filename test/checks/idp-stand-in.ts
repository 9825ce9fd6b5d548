// A stand-in identity provider for `npm run check:idp`, in a process of its own: it signs with
// `jose` (an outside JOSE implementation, not the worker's), serves its JWK Set, and on request
// sends what Keycloak, Auth0 or Okta send when a session ends there: an OpenID Connect
// back-channel logout token (a form POST) or a global token revocation (a JSON POST with a
// Bearer JWT, as Okta's Universal Logout). Prints one JSON line when it listens:
// {"port", "issuer"}. Its own API, on loopback:
//   GET  /jwks                         its public keys
//   POST /logout   {target, sub, sid?, jti?, forged?}   signs and sends a logout token
//   POST /revoke   {target, sub}        signs a JWT (aud: the target URL) and sends the revocation
//   POST /set      {target, audience, event, sub, claims?}   signs a CAEP SET about the user `sub`
//                                       (iss_sub) and pushes it (RFC 8935), as Okta's or Entra's
//                                       Shared Signals transmitter does
// Each answers {"status", "body"}: what the service answered. `jti` resends a token's id (a
// replay); `forged` signs with a key the JWK Set does not have. Its arguments: the client id
// the service is registered with, the logout tokens' audience; and, optionally, its issuer (two
// stand-ins sharing one, as two customers of one Google Workspace do), else one of its own URL.
// It is also a Shared Signals receiver of its own (the service's sign-outs sent back):
//   POST /ssf/receiver {transmitter, authorization}   the service's issuer and the Authorization its pushes carry
//   POST /ssf/push                     RFC 8935: the SET verified with `jose` against the
//                                      transmitter's JWK Set (iss, aud: this issuer, typ), 202;
//                                      400 or 401 as §2.4 says; 503 until /ssf/receiver is told
//   GET  /ssf/received                 every push: when it came, whether verified, its claims
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createRemoteJWKSet, decodeJwt, exportJWK, generateKeyPair, type JWTPayload, jwtVerify, SignJWT } from "jose";

const CLIENT_ID = process.argv[2] ?? "session-service";
const BCL_EVENT = "http://schemas.openid.net/event/backchannel-logout";
const CAEP = "https://schemas.openid.net/secevent/caep/event-type/";

const signing = await generateKeyPair("ES256");
const stranger = await generateKeyPair("ES256");
const jwks = { keys: [{ ...(await exportJWK(signing.publicKey)), kid: "stand-in-1", alg: "ES256", use: "sig" }] };
const sent = new Map<string, string>();

async function bodyOf(request: IncomingMessage): Promise<Record<string, unknown>> {
  let text = "";
  for await (const chunk of request) text += chunk;
  return JSON.parse(text || "{}");
}

async function answer(response: Response) {
  return { status: response.status, body: await response.text() };
}

let receiver: { issuer: string; keys: ReturnType<typeof createRemoteJWKSet>; authorization: string } | null = null;
const received: { at: number; verified: boolean; claims: JWTPayload | null; error?: string }[] = [];

/** An RFC 8935 push: verified, then kept; what a real receiver would act on. */
async function receiveSet(request: IncomingMessage, response: ServerResponse) {
  let token = "";
  for await (const chunk of request) token += chunk;
  const at = Date.now();
  let claims: JWTPayload | null = null;
  try {
    claims = decodeJwt(token);
  } catch {}
  const refuse = (status: number, err: string, description: string) => {
    received.push({ at, verified: false, claims, error: `${err}: ${description}` });
    response.writeHead(status, { "Content-Type": "application/json" });
    response.end(JSON.stringify({ err, description }));
  };
  if (!receiver) return refuse(503, "not_ready", "the receiver is not configured yet");
  if (request.headers.authorization !== receiver.authorization)
    return refuse(401, "authentication_failed", "wrong Authorization");
  if (request.headers["content-type"] !== "application/secevent+jwt")
    return refuse(400, "invalid_request", "not application/secevent+jwt");
  try {
    const { payload } = await jwtVerify(token, receiver.keys, {
      issuer: receiver.issuer,
      audience: issuer,
      typ: "secevent+jwt",
    });
    received.push({ at, verified: true, claims: payload });
    response.writeHead(202);
    response.end();
  } catch (error) {
    refuse(400, "invalid_request", String(error));
  }
}

const server = createServer(async (request, response) => {
  const reply = (status: number, value: unknown) => {
    response.writeHead(status, { "Content-Type": "application/json" });
    response.end(JSON.stringify(value));
  };
  try {
    if (request.method === "GET" && request.url === "/jwks") return reply(200, jwks);
    if (request.method === "POST" && request.url === "/ssf/push") return await receiveSet(request, response);
    if (request.method === "GET" && request.url === "/ssf/received") return reply(200, received);
    if (request.method === "POST" && request.url === "/ssf/receiver") {
      const { transmitter, authorization } = await bodyOf(request);
      const keys = createRemoteJWKSet(new URL(`${transmitter}/ssf/jwks.json`));
      receiver = { issuer: String(transmitter), keys, authorization: String(authorization) };
      return reply(200, {});
    }
    const { target, sub, sid, jti, forged, audience, event, claims } = await bodyOf(request);
    const now = Math.floor(Date.now() / 1000);
    const key = forged ? stranger.privateKey : signing.privateKey;
    if (request.method === "POST" && request.url === "/logout") {
      // A resent token is the very same text, as a provider's retry would be.
      const id = typeof jti === "string" ? jti : crypto.randomUUID();
      let token = sent.get(id);
      if (!token) {
        const claims = { sub: String(sub), ...(sid ? { sid: String(sid) } : {}), events: { [BCL_EVENT]: {} } };
        token = await new SignJWT(claims)
          .setProtectedHeader({ alg: "ES256", kid: "stand-in-1", typ: "logout+jwt" })
          .setIssuer(issuer)
          .setAudience(CLIENT_ID)
          .setIssuedAt(now)
          .setExpirationTime(now + 120)
          .setJti(id)
          .sign(key);
        sent.set(id, token);
      }
      const form = new URLSearchParams({ logout_token: token });
      const sentTo = await fetch(String(target), {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: form,
      });
      return reply(200, { ...(await answer(sentTo)), jti: id });
    }
    if (request.method === "POST" && request.url === "/revoke") {
      const jwt = await new SignJWT({})
        .setProtectedHeader({ alg: "ES256", kid: "stand-in-1", typ: "JWT" })
        .setIssuer(issuer)
        .setAudience(String(target))
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .setJti(crypto.randomUUID())
        .sign(key);
      const sentTo = await fetch(String(target), {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${jwt}` },
        body: JSON.stringify({ sub_id: { format: "iss_sub", iss: issuer, sub } }),
      });
      return reply(200, await answer(sentTo));
    }
    if (request.method === "POST" && request.url === "/set") {
      const payload = {
        sub_id: { format: "iss_sub", iss: issuer, sub: String(sub) },
        events: { [`${CAEP}${String(event)}`]: { event_timestamp: now, ...(claims as object | undefined) } },
      };
      const set = await new SignJWT(payload)
        .setProtectedHeader({ alg: "ES256", kid: "stand-in-1", typ: "secevent+jwt" })
        .setIssuer(issuer)
        .setAudience(String(audience))
        .setIssuedAt(now)
        .setJti(crypto.randomUUID())
        .sign(key);
      const sentTo = await fetch(String(target), {
        method: "POST",
        headers: { "Content-Type": "application/secevent+jwt" },
        body: set,
      });
      return reply(200, await answer(sentTo));
    }
    reply(404, { error: "not_found" });
  } catch (error) {
    reply(500, { error: String(error) });
  }
});

await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const { port } = server.address() as { port: number };
const issuer = process.argv[3] ?? `http://127.0.0.1:${port}/realms/stand-in`;
console.log(JSON.stringify({ port, issuer }));
