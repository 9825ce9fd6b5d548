import type { Instant } from "./clock.ts";
import type { Config } from "./config.ts";
import type { Database, TokenProof } from "./db/queries.ts";

/** What every handler can read: bindings, parsed config, the database, the proven token. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    config: Config;
    db: Database;
    /** The request's one "now" (and idle cutoff). */
    at: Instant;
    /** CF-Connecting-IP when it parses as an IP address. */
    clientIp: string | null;
    proof: TokenProof;
    /** D1 round trips made so far by this request (for the request log). */
    roundTrips: () => number;
  };
}
