import type { TokenProof } from "../db/liveness.ts";
import type { Place, Shards } from "../db/shards.ts";
import type { Instant } from "../domain/clock.ts";
import type { Config } from "../domain/config.ts";
import type { Outbox } from "../services/outbox.ts";

/** What every handler can read: bindings, parsed config, the databases, the proven token. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    config: Config;
    /** The deployment's databases (metered); the one a request uses is chosen from its token. */
    shards: Shards;
    /** The bucket and database of the token's session: every query of the request starts here. */
    place: Place;
    /** The request's one "now" (and idle cutoff). */
    at: Instant;
    /** CF-Connecting-IP when it parses as an IP address. */
    clientIp: string | null;
    proof: TokenProof;
    /** Where the request's session events go after the response; null without SESSION_EVENTS. */
    outbox: Outbox | null;
    /** D1 round trips made so far by this request (for the request log). */
    roundTrips: () => number;
  };
}
