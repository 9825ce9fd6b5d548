import type { Config } from "./config.ts";

/**
 * The moment a request is judged at. A session is live when it has not expired and, with
 * an idle timeout, was active after `idleCutoff`. Read once per request from the one
 * clock (tests move it with fake timers).
 */
export interface Instant {
  now: Date;
  idleCutoff: Date | null;
  /**
   * With SESSION_SLIDING_TTL, the activity write also renews expiry, never past creation +
   * this many ms (SESSION_MAX_LIFETIME_SECONDS); null when expiry is fixed at creation.
   */
  slidingMaxLifetimeMs: number | null;
}

export function instant(config: Pick<Config, "idleTimeoutSeconds" | "slidingTtl" | "maxLifetimeSeconds">): Instant {
  const now = new Date();
  const idle = config.idleTimeoutSeconds;
  return {
    now,
    idleCutoff: idle > 0 ? new Date(now.getTime() - idle * 1000) : null,
    slidingMaxLifetimeMs: config.slidingTtl ? config.maxLifetimeSeconds * 1000 : null,
  };
}
