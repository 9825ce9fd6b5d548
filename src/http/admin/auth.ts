import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { routePath } from "hono/route";
import { type AdminKey, type AdminScope, matchAdminKey, readAdminKeys } from "../../domain/admin-keys.ts";
import { logLine } from "../../domain/log.ts";
import type { Refused } from "../../domain/refusal.ts";
import { noteKeyUse } from "../../services/admin-key-uses.ts";
import type { AppEnv } from "../app-env.ts";
import { bearerToken } from "../credentials.ts";
import { unauthorized } from "../errors.ts";
import type { ScopedEnv } from "../middleware/scope.ts";
import { insufficientScope, notFound } from "../refusals.ts";

// Who may call the admin API (src/domain/admin-keys.ts): a key from ADMIN_KEYS, sent as
// `Authorization: Bearer ssak_…`, never a cookie (a browser never sends one on its own, and no
// CORS header is ever answered here, so a page cannot call these routes).

export type AdminEnv = ScopedEnv & { Variables: { adminKey: AdminKey } };

/** Without ADMIN_KEYS the admin API does not exist: every /admin/ path is 404, before anything else. */
export const requireAdminApi = createMiddleware<AppEnv>(async (c, next) => {
  if (!readAdminKeys(c.env)) throw notFound();
  await next();
});

/**
 * The call's key, holding `scope`: a missing, malformed, unknown or revoked key is 401 (counted
 * against the client's failed-authentication limit), a key without the scope 403 (RFC 6750
 * `insufficient_scope`). Every call a key makes, answered or refused, writes one line naming it.
 */
export function requireAdminKey(scope: AdminScope) {
  return createMiddleware<AdminEnv>(async (c, next) => {
    const keys = readAdminKeys(c.env);
    const presented = bearerToken(c);
    const key = keys && presented ? await matchAdminKey(keys, presented) : null;
    if (!key) throw unauthorized("invalid_token", Boolean(presented), "admin");
    // The key's id and name, never the key: what an operator searches the logs by.
    const log = (status: number) =>
      logLine("info", "admin_call", { key: key.id, name: key.name, method: c.req.method, route: routePath(c), status });
    if (!key.scopes.includes(scope)) {
      log(403);
      throw insufficientScope(scope);
    }
    c.set("adminKey", key);
    // A refusal or failure inside is already the answer here (Hono's onError runs per handler).
    await next();
    log(c.res.status);
    // For the operator's list of keys; after the answer, and only once a minute or so.
    const { shards, at, afterAnswer } = c.var.scope;
    if (c.res.status < 500) afterAnswer?.(() => noteKeyUse(shards, key.id, at.now));
  });
}

/**
 * The organization `id`, as the call's key may reach it: a key limited to another organization
 * is answered 404, as for an organization that does not exist (its existence is not revealed),
 * and the attempt is one `admin_key_outside` line beside the call's `admin_call`. `id` null: the
 * deployment as a whole (the directory itself, a session outside any organization), which no
 * limited key reaches.
 */
export function reachOrganization(c: Context<AdminEnv>, id: string | null): void {
  const key = c.var.adminKey;
  if (key.organization === undefined || key.organization === id) return;
  throw outsideOrganization(c);
}

/**
 * The call's limited key asked for something outside its organization: its line, and the 404 to
 * throw, `refusal` (the answer for what is not there at all, so the two are one).
 */
export function outsideOrganization(c: Context<AdminEnv>, refusal: Refused = notFound()): Refused {
  const key = c.var.adminKey;
  logLine("warn", "admin_key_outside", {
    key: key.id,
    name: key.name,
    organization: key.organization,
    method: c.req.method,
    route: routePath(c),
  });
  return refusal;
}
