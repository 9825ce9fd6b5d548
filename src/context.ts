import type { Config } from "./config.ts";
import type { Database, TokenProof } from "./db/queries.ts";

/** What every handler can read: bindings, parsed config, the database, the proven token. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    config: Config;
    db: Database;
    proof: TokenProof;
  };
}
