import { InvalidInput } from "./invalid-input.ts";

// Application data on a session: a small JSON object the login flow sets at `create` and the
// rest of the system replaces or patches later (SessionService.updateSessionData), answered with
// the session by `authenticate` and `GET /auth/whoami`, and, for the keys an operator allows
// (ACCESS_TOKEN_DATA_CLAIMS, src/domain/access-token.ts), carried as claims of its access
// tokens. Server-written only: no route lets a session's holder change it, and it is never in
// the user's session list, the security log or a SET.
//
// Why at most 2 KB of JSON: it rides in every `authenticate` and whoami answer and in every
// access token, which a browser or an app sends on each request in a header that also carries
// the token's other claims and signature (servers commonly cap a header at 8 KB, a cookie at
// 4 KB); identity providers hold session claims as small (Clerk advises ~1.2 KB of custom
// session claims, Stytch allows 4 KB); and it is read with the caller's row on every request,
// so D1 moves it on every request too. Anything larger belongs in the application's own
// store, keyed by the session id or the user.

/** A JSON value nested at most one level: a scalar, or an array or object of scalars. */
type Nested<Inner> = null | boolean | number | string | Inner[] | { [key: string]: Inner };
type Scalar = null | boolean | number | string;
/**
 * A JSON value within an object at depth 1 of 8 (MAX_SESSION_DATA_DEPTH): spelled out level by
 * level, since the Workers RPC types cannot expand a recursive JSON type.
 */
export type JsonValue = Nested<Nested<Nested<Nested<Nested<Nested<Nested<Scalar>>>>>>>;

/** A session's application data: a JSON object (`checkSessionData`). */
export type SessionData = { [key: string]: JsonValue };

/** At most this many bytes of its JSON text (UTF-8), as stored. */
export const MAX_SESSION_DATA_BYTES = 2048;

/** Objects and arrays nest at most this deep; the data object itself is level 1. */
export const MAX_SESSION_DATA_DEPTH = 8;

/** How `updateSessionData` changes it: `replace` the whole object, or `merge` a patch into it (RFC 7396). */
export const SESSION_DATA_MODES = ["replace", "merge"] as const;
export type SessionDataMode = (typeof SESSION_DATA_MODES)[number];

const utf8 = new TextEncoder();

/** The bytes of a JSON text in UTF-8, as SQLite's `length(CAST(… AS BLOB))` counts them. */
export function jsonBytes(json: string): number {
  return utf8.encode(json).length;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** The first place `value` is not JSON or nests too deep, as a path from `at`; null when it is fine. */
function problemOf(value: unknown, at: string, depth: number): { path: string; what: "json" | "depth" } | null {
  if (value === null || typeof value === "boolean" || typeof value === "string") return null;
  if (typeof value === "number") return Number.isFinite(value) ? null : { path: at, what: "json" };
  const array = Array.isArray(value);
  if (!array && !isPlainObject(value)) return { path: at, what: "json" };
  if (depth > MAX_SESSION_DATA_DEPTH) return { path: at, what: "depth" };
  const entries = array ? (value as unknown[]).map((item, index) => [`[${index}]`, item] as const) : null;
  for (const [key, item] of entries ?? Object.entries(value as object).map(([key, item]) => [`.${key}`, item])) {
    const found = problemOf(item, `${at}${key}`, depth + 1);
    if (found) return found;
  }
  return null;
}

/**
 * The one rule for application data, checked before any round trip: a plain JSON object (not
 * an array, not null), its values JSON (null, booleans, finite numbers, strings, arrays,
 * plain objects; no undefined, Date, Map, BigInt, …), nesting at most MAX_SESSION_DATA_DEPTH
 * deep, and at most MAX_SESSION_DATA_BYTES bytes of JSON. InvalidInput names the
 * rule broken (and where); `name` is the input's name in it. Answers the data and its JSON
 * text; an empty object stands for no data (src/db/session-data.ts stores it as none).
 */
export function checkSessionData(input: unknown, name = "data"): { data: SessionData; json: string } {
  if (!isPlainObject(input))
    throw new InvalidInput(
      `${name} must be a JSON object (not ${describe(input)}), at most ${MAX_SESSION_DATA_BYTES} bytes`,
    );
  const problem = problemOf(input, name, 1);
  if (problem?.what === "json")
    throw new InvalidInput(
      `${name} must hold only JSON values (null, booleans, finite numbers, strings, arrays, objects): ${problem.path} is not one`,
    );
  if (problem?.what === "depth")
    throw new InvalidInput(
      `${name} may nest objects and arrays at most ${MAX_SESSION_DATA_DEPTH} deep: ${problem.path} is deeper`,
      RangeError,
    );
  const json = JSON.stringify(input);
  const bytes = jsonBytes(json);
  if (bytes > MAX_SESSION_DATA_BYTES)
    throw new InvalidInput(
      `${name} must be at most ${MAX_SESSION_DATA_BYTES} bytes of JSON (UTF-8); it is ${bytes}`,
      RangeError,
    );
  return { data: input as SessionData, json };
}

/** What a refused input was, for the message: never its value. */
function describe(input: unknown): string {
  if (input === null || input === undefined) return String(input);
  if (Array.isArray(input)) return "an array";
  if (typeof input === "object") return `a ${Object.prototype.toString.call(input).slice(8, -1)}`;
  return `a ${typeof input}`;
}

/** The mode of an update: `replace` when omitted; anything else is InvalidInput. */
export function checkSessionDataMode(mode: unknown): SessionDataMode {
  if (mode === undefined) return "replace";
  if (!(SESSION_DATA_MODES as readonly unknown[]).includes(mode))
    throw new InvalidInput(`mode must be one of ${SESSION_DATA_MODES.join(", ")}`);
  return mode as SessionDataMode;
}

/** Data as a row holds it: an empty object is none, null (src/db/session-data.ts does the same in SQL). */
export function storedData(data: SessionData): SessionData | null {
  return Object.keys(data).length === 0 ? null : data;
}
