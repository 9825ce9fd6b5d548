import type { Context, Env, MiddlewareHandler } from "hono";
import type { BlankInput, BlankSchema, HandlerResponse, ToSchema, TypedResponse } from "hono/types";
import type { AppEnv } from "./app-env.ts";
import { Hono } from "./hono.ts";
import { requireBearerOrCookie, requireToken, type TokenEnv } from "./middleware/auth.ts";
import { corsForAllowedOrigins } from "./middleware/cors.ts";
import { withScope } from "./middleware/scope.ts";
import {
  ALLOW_HEADER,
  AUTH_ERRORS,
  anyRequest,
  BEARER_OR_COOKIE,
  CHALLENGE,
  CROSS_SITE,
  error,
  HELD,
  type Json,
  type JsonObject,
  LOGOUT_RATE_LIMITED,
  METHOD_NOT_ALLOWED,
  NO_TOKEN,
  type Operation,
  type PathItem,
  RATE_LIMITED,
  type Responses,
} from "./openapi-parts.ts";

// One route, declared once: its method and path, the credential it takes, its request's members
// (each with what the document says of it and the one function that reads it), its answers and
// its handler. The app's router (`router`), the OpenAPI document's paths (`pathsOf`) and the
// parts of the origin the app runs middleware on (`mountsOf`) are all built from one list of
// them (./routes.ts), so a route is served and described, or neither, a member is read as it is
// documented, and a credential's middleware and its answers (401, 403, 429) go together.

export type Method = "get" | "post" | "put" | "patch" | "delete";

/**
 * A part of the origin an API sits in, its routes' paths under `path`: every request there,
 * routed or not (a 404, a 405, a CORS preflight), runs `use` before it is routed, and every
 * answer there is no-store (src/http/app.ts).
 */
export interface Mount {
  path: string;
  use: readonly MiddlewareHandler[];
}

/** What a route takes to be called, and what that costs it in answers; E: what its handler then finds in `c.var`. */
// biome-ignore lint/correctness/noUnusedVariables: E is for `declare`, which types a route's handler by its credential's.
export interface Credential<E extends Env> {
  /** The operation's OpenAPI security requirement. */
  security: Json;
  /** What the document says of every operation taking it, before the route's own description. */
  description?: string;
  /** Where the routes taking it sit; what runs there before routing runs before `use`. */
  mount?: Mount;
  /** Run before the handler, in order: each checks a part of the request or sets a part of E. */
  use: readonly MiddlewareHandler[];
  /** The answers every route taking it can give; a route's own answer of the same status replaces one. */
  answers: Responses;
  /** The path's answer to a method it does not list (`x-other-methods`). */
  otherMethods: Responses;
}

/**
 * A member of the request (a path, query or header parameter, or the body), declared once: what
 * the document says of it (a Parameter Object or a `$ref` to one; for the body, the Request Body
 * Object) and the one function that reads and checks it, refusing as the contract says. The
 * router reads each after the credential, in the order declared, and hands the handler what it
 * read. A member whose refusal must wait (say, for the token's) reads to what the handler acts on
 * when it may refuse: the reading to do, as a function, or the refusal to throw.
 */
export interface Member<T, E extends Env = Env> {
  doc: JsonObject;
  read: (c: Context<E>) => T | Promise<T>;
  /** The refusals reading it can give, beside the credential's and before the route's. */
  answers?: Responses;
}

/** I: what its parameters read, by name; B: what its body reads. */
export interface Route<E extends Env, M extends Method, P extends string, R, I, B> {
  method: M;
  /** From the origin, as the router writes it: `:name` for a parameter, with its pattern when it needs one. */
  path: P;
  credential: Credential<E>;
  operationId: string;
  summary: string;
  description?: string;
  /** The path's, the query's and the headers' parameters, by the name the handler reads each by, in the document's order. */
  parameters?: { [K in keyof I]: Member<I[K], E> };
  body?: Member<B, E>;
  /** Beyond the credential's. */
  answers: Responses;
  handler: (c: Context<E, P>, input: I & { body: B }) => R;
}

// biome-ignore lint/suspicious/noExplicitAny: a list holds routes of every env; each was checked against its own when declared.
export type AnyRoute = Route<any, Method, string, HandlerResponse<unknown>, any, any>;

/** A route, its handler's context typed by its credential and its path, and its input by its members. */
export const declare = <
  E extends Env,
  M extends Method,
  P extends string,
  R extends HandlerResponse<unknown>,
  I extends Record<string, unknown> = Record<never, never>,
  B = undefined,
>(
  route: Route<E, M, P, R, I, B>,
) => route;

/** The route's members, read in order: its handler's input. */
async function inputOf(c: Context, { parameters = {}, body }: AnyRoute) {
  const input: { [name: string]: unknown; body: unknown } = { body: undefined };
  for (const [name, member] of Object.entries<Member<unknown>>({ ...parameters, ...(body ? { body } : {}) }))
    input[name] = await member.read(c);
  return input;
}

/** A handler's answer as the typed client reads it: a typed JSON answer as it is, any other as untyped. */
type Typed<T> = T extends TypedResponse ? T : TypedResponse;

/**
 * The routes as Hono's typed client (`hc`) sees them: each path's methods and their answers.
 * Accumulated in `Schema`, so the recursion is a tail call: TypeScript then follows one level
 * per route without calling the list too deep to instantiate.
 */
type SchemaOf<Routes, Schema = BlankSchema> = Routes extends readonly [infer First extends AnyRoute, ...infer Rest]
  ? SchemaOf<
      Rest,
      Schema & ToSchema<First["method"], First["path"], BlankInput, Typed<Awaited<ReturnType<First["handler"]>>>>
    >
  : Schema;

/** A router serving these routes, mounted at the origin's root: each runs its credential's middleware, reads its members, then runs its handler. */
export function router<const Routes extends readonly AnyRoute[]>(routes: Routes) {
  const served = new Hono<Env, SchemaOf<Routes>>();
  for (const route of routes)
    served.on(route.method, [route.path], ...route.credential.use, async (c) =>
      route.handler(c, await inputOf(c, route)),
    );
  return served;
}

function operation({ operationId, summary, description, credential, parameters = {}, body, answers }: AnyRoute) {
  const listed = Object.values<Member<unknown>>(parameters);
  const described = [credential.description, description].filter((part) => part !== undefined).join(" ");
  const refusals = [...listed, ...(body ? [body] : [])].map((member) => member.answers);
  return {
    operationId,
    summary,
    ...(described === "" ? {} : { description: described }),
    security: credential.security,
    ...(listed.length === 0 ? {} : { parameters: listed.map((parameter) => parameter.doc) }),
    ...(body === undefined ? {} : { requestBody: body.doc }),
    responses: Object.assign({}, credential.answers, ...refusals, answers),
  };
}

/** The document's paths of these routes: each path's operations in the order declared, then its answer to other methods. */
export function pathsOf(routes: readonly AnyRoute[]): Record<string, PathItem> {
  const items: Record<string, { [M in Method]?: Operation } & { "x-other-methods"?: Responses }> = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");
    const { "x-other-methods": _, ...item } = items[path] ?? {};
    items[path] = { ...item, [route.method]: operation(route), "x-other-methods": route.credential.otherMethods };
  }
  return items;
}

/** The mounts these routes' credentials name, each once, in the order first named. */
export const mountsOf = (routes: readonly AnyRoute[]): Mount[] => [
  ...new Set(routes.flatMap(({ credential }) => credential.mount ?? [])),
];

/**
 * The session API: every /auth/ request opens its scope (src/http/middleware/scope.ts), which
 * CORS reads ALLOWED_ORIGINS from, a preflight's too.
 */
export const AUTH: Mount = { path: "/auth", use: [withScope, corsForAllowedOrigins] };

/** Bearer, or the session cookie from the same site (src/http/middleware/auth.ts's `requireToken`). */
export const TOKEN: Credential<TokenEnv> = {
  security: BEARER_OR_COOKIE,
  mount: AUTH,
  use: [requireToken],
  answers: {
    "401": error(`${NO_TOKEN} ${HELD}`, ["invalid_token", "reauthentication_required"], CHALLENGE),
    ...CROSS_SITE,
    ...RATE_LIMITED,
    ...AUTH_ERRORS,
  },
  otherMethods: METHOD_NOT_ALLOWED,
};

/** The logouts' (`requireBearerOrCookie`): each says its own 400 and 401, which clear a carried cookie. */
export const LOGOUT_TOKEN: Credential<TokenEnv> = {
  security: BEARER_OR_COOKIE,
  mount: AUTH,
  use: [requireBearerOrCookie],
  answers: { ...CROSS_SITE, ...LOGOUT_RATE_LIMITED, ...AUTH_ERRORS },
  otherMethods: METHOD_NOT_ALLOWED,
};

/** None: a public document (a key set, discovery), cacheable, so not no-store. */
export const PUBLIC: Credential<AppEnv> = {
  security: [],
  use: [],
  answers: anyRequest(false),
  otherMethods: {
    "405": error("A method this path does not answer.", ["method_not_allowed"], { Allow: ALLOW_HEADER }, false),
  },
};
