/** The secrets the HTTP entry point reads beside the vars, which wrangler's generated `Env` does not know. */
interface SecretVars {
  /** The admin API's keys (src/domain/admin-keys.ts); unset: no admin API. */
  ADMIN_KEYS?: string;
}

/**
 * What every handler can read: the bindings. A variable is declared by the middleware that sets
 * it (`ScopedEnv`, src/http/middleware/scope.ts; `TokenVariables`, src/http/middleware/auth.ts),
 * so a handler's types say what is there: what runs before it, or on every path, may find none.
 */
export interface AppEnv {
  Bindings: Env & SecretVars;
}
