import type { Context } from "hono";
import { readSessionToken, type SessionToken } from "../services/session-token.ts";
import { readSessionCookie } from "./cookie.ts";
import type { ScopedEnv } from "./middleware/scope.ts";

// The one place a request's credential is read. An Authorization header, when present,
// decides alone: a rejected Bearer token never falls back to the cookie. Tokens in the
// query string or body are never looked at. A device-bound session's bound cookie counts
// only beside its session cookie: a Bearer token never carries one.

export type Credential =
  | { kind: "none" }
  /** `presented`: a token was actually offered (not another scheme, not an empty one). */
  | { kind: "malformed"; source: "bearer" | "cookie"; presented: boolean }
  | ({ kind: "token"; source: "bearer" | "cookie" } & SessionToken);

const BEARER = /^Bearer +(.*)$/i;

/** The token of `Authorization: Bearer <token>`; undefined without the header or with another scheme. */
export function bearerToken(c: Context): string | undefined {
  const authorization = c.req.header("Authorization");
  return authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
}

export async function readCredential<E extends ScopedEnv>(c: Context<E>): Promise<Credential> {
  if (c.req.header("Authorization") !== undefined) return parsed(c, "bearer", bearerToken(c));
  return readCookieCredential(c);
}

/** The session cookie alone, whatever else the request carries (the device-binding endpoints). */
export function readCookieCredential<E extends ScopedEnv>(c: Context<E>): Promise<Credential> {
  const cookie = readSessionCookie(c, c.var.scope.config.cookieName);
  // Sent twice (null): there is no one token to trust, so it is malformed.
  if (cookie === undefined) return Promise.resolve({ kind: "none" });
  return parsed(c, "cookie", cookie ?? undefined);
}

async function parsed<E extends ScopedEnv>(
  c: Context<E>,
  source: "bearer" | "cookie",
  token: string | undefined,
): Promise<Credential> {
  const { shards, config } = c.var.scope;
  const cookie = source === "cookie" ? { header: c.req.header("Cookie"), name: config.cookieName } : undefined;
  const read = await readSessionToken(shards, token, source, cookie);
  if (!read) return { kind: "malformed", source, presented: Boolean(token) };
  return { kind: "token", source, ...read };
}
