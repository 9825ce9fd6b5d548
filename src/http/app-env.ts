import type { Scope } from "../services/scope.ts";
import type { SessionToken } from "../services/session-token.ts";

/** The secrets the HTTP door reads beside the vars, which wrangler's generated `Env` does not know. */
interface SecretVars {
  /** The admin API's keys (src/domain/admin-keys.ts); unset: no admin API. */
  ADMIN_KEYS?: string;
}

/** What every handler can read: the bindings, the request's scope, the caller's token. */
export interface AppEnv {
  Bindings: Env & SecretVars;
  Variables: {
    /** Config, the instant, the databases and the outbox of this request (src/services/scope.ts). */
    scope: Scope;
    /** The caller's session token, set by the middleware of src/http/middleware/auth.ts. */
    token: SessionToken;
  };
}
