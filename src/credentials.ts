import type { Context } from "hono";
import type { AppEnv } from "./context.ts";
import { readSessionCookie } from "./cookie.ts";
import type { TokenProof } from "./db/queries.ts";
import type { Place } from "./db/shards.ts";
import { proveToken } from "./token.ts";

// The one place a request's credential is read. An Authorization header, when present,
// decides alone: a rejected Bearer token never falls back to the cookie. Tokens in the
// query string or body are never looked at.

export type Credential =
  | { kind: "none" }
  /** `presented`: a token was actually offered (not another scheme, not an empty one). */
  | { kind: "malformed"; source: "bearer" | "cookie"; presented: boolean }
  /** `place`: the bucket and database the token's session lives in, named by its id. */
  | { kind: "token"; source: "bearer" | "cookie"; proof: TokenProof; place: Place };

const BEARER = /^Bearer +(.*)$/i;

export async function readCredential(c: Context<AppEnv>, acceptCookie: boolean): Promise<Credential> {
  const authorization = c.req.header("Authorization");
  if (authorization !== undefined) return prove(c, "bearer", BEARER.exec(authorization)?.[1]);
  if (!acceptCookie) return { kind: "none" };
  const cookie = readSessionCookie(c, c.var.config.cookieName);
  // Sent twice (null): there is no one token to trust, so it is malformed.
  return cookie === undefined ? { kind: "none" } : prove(c, "cookie", cookie ?? undefined);
}

async function prove(c: Context<AppEnv>, source: "bearer" | "cookie", token: string | undefined): Promise<Credential> {
  const proof = token === undefined ? null : await proveToken(token);
  // An id naming no database of this deployment cannot be a token it issued: malformed.
  const place = proof && c.var.shards.forSession(proof.id);
  if (!proof || !place) return { kind: "malformed", source, presented: Boolean(token) };
  return { kind: "token", source, proof, place };
}
