import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { base64url } from "jose";
import { expect } from "vitest";
import { bindingOf, bucketOf, readShardMap, type Shards } from "../src/db/shards.ts";
import { instant } from "../src/domain/clock.ts";
import { type Config, readConfig } from "../src/domain/config.ts";
import { BUCKET_COUNT } from "../src/domain/token.ts";
import { readUpstreams } from "../src/domain/upstreams/config.ts";
import { type ErrorCode, MESSAGES } from "../src/http/error-codes.ts";
import worker from "../src/index.ts";
import type { Outbox } from "../src/services/outbox.ts";
import type { Scope } from "../src/services/scope.ts";
import { validateResponse } from "./openapi.ts";

export const ORIGIN = "https://sessions.example";
export const COOKIE_NAME = "__Host-session";
export const CHROME_MAC =
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";
/** Other browsers than the one requests come from by default: a copied token's new home. */
export const FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
export const FIREFOX_WINDOWS = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0";
export const CLEARED_COOKIE = `${COOKIE_NAME}=; Max-Age=0; Path=/; HttpOnly; Secure; SameSite=Lax`;
export const CHALLENGE = 'Bearer realm="auth"';
export const REJECTED_CHALLENGE = 'Bearer realm="auth", error="invalid_token"';

// Storage is shared by the tests of one file, so every test makes its own users.
export function newUser(): string {
  return `user-${crypto.randomUUID()}`;
}

export interface Issued {
  id: string;
  token: string;
  expiresAt: string;
  cookie: string;
  newDevice: boolean;
  /** Only for a new device: its report token (GET, POST /auth/report). */
  reportToken?: string;
}

/** Issues a session through the public RPC entrypoint, as the login worker would. */
export function issue(
  userId: string,
  options: {
    userAgent?: string;
    ipAddress?: string;
    ttlSeconds?: number;
    country?: string;
    city?: string;
    asn?: number;
    carrier?: "cookie" | "bearer" | "both";
    organization?: string;
  } = {},
): Promise<Issued> {
  return exports.SessionService.create({
    userAgent: CHROME_MAC,
    ipAddress: "203.0.113.7",
    ...options,
    userId,
  });
}

export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
export const sessionCookie = (token: string) => ({ Cookie: `${COOKIE_NAME}=${token}` });

/** A client address of its own for each request unless one is given, so failed
 * authentications of unrelated tests never share a rate-limit bucket. */
export function randomIp(): string {
  const word = () => Math.floor(Math.random() * 0x10000).toString(16);
  return `2001:db8:${word()}:${word()}::${word()}`;
}

/** Where Cloudflare's edge saw a request come from (`request.cf`): its country and network. */
export interface Network {
  country: string;
  asn: number;
  /** Where Cloudflare places the address, in degrees, as strings (request.cf.latitude, longitude). */
  latitude?: string;
  longitude?: string;
}

// A browser always sends a User-Agent: the one the sessions of `issue` were created with, so a
// request is from the session's own device unless a test says otherwise.
function request(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: BodyInit,
  network?: Network,
): Request {
  return new Request(`${ORIGIN}${path}`, {
    method,
    headers: { "CF-Connecting-IP": randomIp(), "User-Agent": CHROME_MAC, ...headers },
    body,
    // Only what the worker reads of request.cf; the runtime passes it through as given.
    ...(network ? { cf: network as unknown as IncomingRequestCfProperties } : {}),
  });
}

/** A request through the service's public HTTP interface: the worker's `fetch`. */
export async function call(method: string, path: string, headers: Record<string, string> = {}): Promise<Response> {
  const sent = request(method, path, headers);
  const response = await exports.default.fetch(sent);
  await validateResponse(sent.method, sent.url, response);
  return response;
}

/** The same, with bindings of the caller's choosing (a wrapped or failing D1, other vars), and a body. */
export async function callWith(
  bindings: Partial<Env>,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: BodyInit,
  network?: Network,
): Promise<Response> {
  const ctx = createExecutionContext();
  const sent = request(method, path, headers, body, network);
  const response = await worker.fetch(sent, { ...env, ...bindings }, ctx);
  await waitOnExecutionContext(ctx);
  await validateResponse(sent.method, sent.url, response);
  return response;
}

// The suite runs on one database and on four (vitest.config.ts): tests that look at the
// tables directly find them through these, with the worker's own placement code.

/** The D1 bindings of the deployment under test: `DB`, or `DB`, `DB_1`, `DB_2`, `DB_3`. */
export function shardBindings(): string[] {
  return [...readShardMap(env).bindings];
}

/** Two regions over the suite's databases: the default one on the first half, `eu` on the rest. */
export function twoRegions(): Partial<Env> {
  const bindings = shardBindings();
  const half = bindings.length / 2;
  const spread = (names: string[]) =>
    Object.fromEntries(
      names.map((name, i) => {
        const size = BUCKET_COUNT / names.length;
        return [`${i * size}-${(i + 1) * size - 1}`, name];
      }),
    );
  return { SHARDS: JSON.stringify({ default: spread(bindings.slice(0, half)), eu: spread(bindings.slice(half)) }) };
}

export function d1(binding: string): D1Database {
  return (env as unknown as Record<string, D1Database>)[binding] as D1Database;
}

/** The binding that holds a user's sessions. */
export async function bindingOfUser(userId: string, region = "default"): Promise<string> {
  return bindingOf(readShardMap(env), { region, bucket: await bucketOf(userId) }) as string;
}

/** The database that holds a user's sessions. */
export async function d1OfUser(userId: string): Promise<D1Database> {
  return d1(await bindingOfUser(userId));
}

/** A new user whose sessions live in `binding`. */
export async function newUserOn(binding: string): Promise<string> {
  for (;;) {
    const user = newUser();
    if ((await bindingOfUser(user)) === binding) return user;
  }
}

/** Every database of the deployment under test, by binding. */
export function databases(): Record<string, D1Database> {
  return Object.fromEntries(shardBindings().map((binding) => [binding, d1(binding)]));
}

/** Bindings for `callWith` that put `wrap` around every database of the deployment. */
export function wrapShards(wrap: (d1: D1Database, binding: string) => D1Database): Partial<Env> {
  return Object.fromEntries(shardBindings().map((binding) => [binding, wrap(d1(binding), binding)]));
}

/** Every row of a table on every database, to show that a request changed nothing. */
export async function tableSnapshot(
  table: "sessions" | "session_events" | "upstream_links" = "sessions",
): Promise<unknown[]> {
  const rows: unknown[] = [];
  const order = table === "upstream_links" ? "upstream, subject" : "id";
  for (const binding of shardBindings()) {
    rows.push(...(await d1(binding).prepare(`SELECT * FROM ${table} ORDER BY ${order}`).all()).results);
  }
  return rows;
}

export async function sessionIdsOf(userId: string): Promise<string[]> {
  const { results } = await (await d1OfUser(userId))
    .prepare("SELECT id FROM sessions WHERE user_id = ? ORDER BY id")
    .bind(userId)
    .all<{ id: string }>();
  return results.map((row) => row.id);
}

/** What every response carries, success or error (hono's secureHeaders, tightened for an API). */
export function expectSecurityHeaders(response: Response): void {
  expect(response.headers.get("Content-Security-Policy")).toBe(
    "default-src 'none'; base-uri 'none'; frame-ancestors 'none'",
  );
  expect(response.headers.get("X-Frame-Options")).toBe("DENY");
  expect(response.headers.get("X-Content-Type-Options")).toBe("nosniff");
  expect(response.headers.get("Strict-Transport-Security")).toBe("max-age=31536000; includeSubDomains");
  expect(response.headers.get("Referrer-Policy")).toBe("no-referrer");
  expect(response.headers.get("Cross-Origin-Resource-Policy")).toBe("same-origin");
}

/**
 * Asserts an error response exactly: status, the contract's body, and the headers that
 * vary (null means the header must be absent).
 */
export async function expectError(
  response: Response,
  status: number,
  code: ErrorCode,
  headers: {
    wwwAuthenticate?: string | null;
    setCookie?: string | null;
    allow?: string | null;
    cacheControl?: string | null;
    /** Checked only when given. */
    retryAfter?: string | null;
  } = {},
): Promise<void> {
  expect({ status: response.status, body: await response.json() }).toEqual({
    status,
    body: { code, message: MESSAGES[code] },
  });
  expect(response.headers.get("Content-Type")).toBe("application/json");
  expect(response.headers.get("WWW-Authenticate")).toBe(headers.wwwAuthenticate ?? null);
  expect(response.headers.get("Set-Cookie")).toBe(headers.setCookie ?? null);
  expect(response.headers.get("Allow")).toBe(headers.allow ?? null);
  expect(response.headers.get("Cache-Control")).toBe(
    headers.cacheControl === undefined ? "no-store" : headers.cacheControl,
  );
  if (headers.retryAfter !== undefined) expect(response.headers.get("Retry-After")).toBe(headers.retryAfter);
  expectSecurityHeaders(response);
}

export async function expectMessage(
  response: Response,
  message: string,
  setCookie: string | null = null,
): Promise<void> {
  expect({ status: response.status, body: await response.json() }).toEqual({ status: 200, body: { message } });
  expect(response.headers.get("Content-Type")).toBe("application/json");
  expect(response.headers.get("Cache-Control")).toBe("no-store");
  expect(response.headers.get("Set-Cookie")).toBe(setCookie);
  expectSecurityHeaders(response);
}

/** Whether `token` still authenticates, asked through the RPC entrypoint. */
export async function isLive(token: string): Promise<boolean> {
  return (await exports.SessionService.authenticate(token)) !== null;
}

/** Wrangler's AUTH_FAILURES limiter: 30 failed authentications per client IP per minute. */
export const FAILURE_LIMIT = 30;
const LIMITER_PERIOD_MS = 60_000;

/**
 * The local limiter counts in windows aligned to the wall clock: failures that straddled a
 * window's end would be split between two counters and never limited (CI failed so, twice).
 * Waits, when needed, so that the next `ms` milliseconds fall inside one window.
 */
export async function insideOneLimiterWindow(ms: number): Promise<void> {
  const left = LIMITER_PERIOD_MS - (Date.now() % LIMITER_PERIOD_MS);
  if (left < ms) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

/**
 * A scope over `shards` for calling a service directly, as an entry point would open one: `outbox`
 * null writes events not pending, as without outlets.
 */
export function scopeWith(shards: Shards, config: Config = readConfig(env), outbox: Outbox | null = null): Scope {
  return {
    config,
    at: instant(config),
    shards,
    outbox,
    afterAnswer: null,
    clientIp: null,
    context: null,
    adminKeyId: null,
    reach: null,
    upstreams: () => readUpstreams(env),
    plannedRoundTrip: () => {},
    roundTrips: () => 0,
    extraRoundTrips: () => 0,
  };
}

/**
 * JWS header members with a `crit` (RFC 7515 §4.1.11), each making the JWS invalid to this
 * service, which understands no extension: one it does not know, and malformed ones.
 */
export const CRIT_HEADERS: Record<string, Record<string, unknown>> = {
  "crit naming an extension": { crit: ["urn:example:ext"], "urn:example:ext": true },
  "crit naming b64 (RFC 7797), left true": { crit: ["b64"], b64: true },
  "crit empty": { crit: [] },
  "crit not an array": { crit: "urn:example:ext", "urn:example:ext": true },
  "crit naming a non-string": { crit: [1] },
  "crit naming a standard header": { crit: ["alg"] },
};

/**
 * A compact JWS signed by hand as jose never signs one: `alg` none (no `secret`, an empty
 * signature) or an HMAC keyed with `secret` (HS256 keyed with a public key, the old confusion).
 */
export async function forgedJws(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  secret: Uint8Array | null,
): Promise<string> {
  const encode = (value: unknown) => base64url.encode(JSON.stringify(value));
  const signed = `${encode(header)}.${encode(claims)}`;
  if (secret === null) return `${signed}.`;
  const key = await crypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(signed));
  return `${signed}.${base64url.encode(new Uint8Array(mac))}`;
}
