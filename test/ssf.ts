import { env } from "cloudflare:workers";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { openShards } from "../src/db/shards.ts";
import { issueReceiver } from "../src/services/ssf/receivers.ts";
import { callWith } from "./helpers.ts";

// What the Shared Signals tests share: a transmitter's vars, receivers, and calls with a body.

export const ISSUER = "https://sessions.example";

/** A fresh private JWK (ES256 or RS256 2048), with its kid and any extra members. */
export async function privateJwk(alg: "ES256" | "RS256", kid: string, extra: Record<string, unknown> = {}) {
  const params =
    alg === "ES256"
      ? { name: "ECDSA", namedCurve: "P-256" }
      : { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" };
  const pair = (await crypto.subtle.generateKey(params, true, ["sign", "verify"])) as CryptoKeyPair;
  return { ...((await crypto.subtle.exportKey("jwk", pair.privateKey)) as JsonWebKey), kid, ...extra };
}

export const transmitterVars = (keys: unknown[] | string, issuer = ISSUER) =>
  ({ SSF_ISSUER: issuer, SSF_SIGNING_KEYS: typeof keys === "string" ? keys : JSON.stringify(keys) }) as Partial<Env>;

/** A transmitter with one fresh ES256 key. */
export async function transmitter(extra: Partial<Env> = {}) {
  const key = await privateJwk("ES256", "k1");
  return { key, vars: { ...transmitterVars([key]), ...extra } };
}

/** A receiver credential, issued as `npm run ssf:receivers -- issue` does. */
export function newReceiver(audience = "https://receiver.example") {
  return issueReceiver(openShards(env), { name: "test receiver", audience }, new Date());
}

/** A call to the management API or poll with a receiver's credential and a JSON body. */
export function ssfCall(
  vars: Partial<Env>,
  credential: string | null,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  return callWith(
    vars,
    method,
    path,
    {
      ...(credential === null ? {} : { Authorization: `Bearer ${credential}` }),
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
    },
    body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  );
}

/**
 * A stand-in upstream identity provider (SSF_UPSTREAMS: `vars`): `setAbout` signs a RISC
 * account-disabled SET about a user with `jose`, `push` delivers it to POST /ssf/inbound.
 */
export async function standInUpstream() {
  const issuer = "https://idp.example";
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const key = { ...(await exportJWK(publicKey)), kid: "idp1" };
  const clientId = "sessions-app";
  const upstream = {
    issuer,
    name: "idp",
    audience: ISSUER,
    subject: "iss_sub",
    // Its SETs name users by this service's ids (setAbout), its logouts by its own subjects.
    subjects_are_user_ids: true,
    client_id: clientId,
    jwks: { keys: [key] },
  };
  const vars: Partial<Env> = { SSF_UPSTREAMS: JSON.stringify([upstream]) };
  const setAbout = (userId: string) =>
    new SignJWT({
      jti: crypto.randomUUID(),
      sub_id: { format: "iss_sub", iss: issuer, sub: userId },
      events: { "https://schemas.openid.net/secevent/risc/event-type/account-disabled": {} },
    })
      .setProtectedHeader({ alg: "ES256", kid: key.kid, typ: "secevent+jwt" })
      .setIssuer(issuer)
      .setAudience(ISSUER)
      .setIssuedAt()
      .sign(privateKey);
  const push = (set: string) =>
    callWith(vars, "POST", "/ssf/inbound", { "Content-Type": "application/secevent+jwt" }, set);
  /** Its OpenID Connect back-channel logout of every session of `subject` (its `sub`), answered. */
  const logout = async (subject: string) => {
    const token = await new SignJWT({
      sub: subject,
      events: { "http://schemas.openid.net/event/backchannel-logout": {} },
    })
      .setProtectedHeader({ alg: "ES256", kid: key.kid, typ: "logout+jwt" })
      .setIssuer(issuer)
      .setAudience(clientId)
      .setIssuedAt()
      .setJti(crypto.randomUUID())
      .sign(privateKey);
    const form = new URLSearchParams({ logout_token: token }).toString();
    const headers = { "Content-Type": "application/x-www-form-urlencoded" };
    return callWith(vars, "POST", "/upstreams/idp/backchannel-logout", headers, form);
  };
  return { vars, setAbout, push, logout };
}

export const ACCESS_TOKEN_AUDIENCE = "https://api.example";

/** Access tokens on, with one fresh ES256 key (or the keys given), as an operator configures them. */
export async function accessTokenVars(keys?: unknown[]): Promise<Partial<Env>> {
  // A secret: wrangler's types know only wrangler.toml's vars, as for SSF_SIGNING_KEYS.
  return {
    ACCESS_TOKEN_KEYS: JSON.stringify(keys ?? [await privateJwk("ES256", "at1")]),
    ACCESS_TOKEN_ISSUER: ISSUER,
    ACCESS_TOKEN_AUDIENCE: ACCESS_TOKEN_AUDIENCE,
  } as Partial<Env>;
}
