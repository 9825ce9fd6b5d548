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
  /**
   * With step-up (SESSION_STEP_UP_MAX_AGE_SECONDS), ending another session needs a proof
   * after this; null when step-up is off.
   */
  stepUpCutoff: Date | null;
}

export function instant(
  config: Pick<Config, "idleTimeoutSeconds" | "slidingTtl" | "maxLifetimeSeconds"> &
    Partial<Pick<Config, "stepUpMaxAgeSeconds">>,
): Instant {
  const now = new Date();
  const idle = config.idleTimeoutSeconds;
  const stepUp = config.stepUpMaxAgeSeconds ?? 0;
  return {
    now,
    idleCutoff: idle > 0 ? new Date(now.getTime() - idle * 1000) : null,
    slidingMaxLifetimeMs: config.slidingTtl ? config.maxLifetimeSeconds * 1000 : null,
    stepUpCutoff: stepUp > 0 ? new Date(now.getTime() - stepUp * 1000) : null,
  };
}
