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
// replay); `forged` signs with a key the JWK Set does not have. Its one argument: the client id
// the service is registered with, the logout tokens' audience.
import { createServer, type IncomingMessage } from "node:http";
import { exportJWK, generateKeyPair, SignJWT } from "jose";

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

const server = createServer(async (request, response) => {
  const reply = (status: number, value: unknown) => {
    response.writeHead(status, { "Content-Type": "application/json" });
    response.end(JSON.stringify(value));
  };
  try {
    if (request.method === "GET" && request.url === "/jwks") return reply(200, jwks);
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
const issuer = `http://127.0.0.1:${port}/realms/stand-in`;
console.log(JSON.stringify({ port, issuer }));
