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
  /** SESSION_SLIDING_TTL: a member's session slides unless its organization's policy says otherwise. */
  slides: boolean;
  /** SESSION_MAX_LIFETIME_SECONDS in ms: where the deployment does not slide, a sliding member's cap (`forMember`). */
  maxLifetimeMs: number;
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
    slides: config.slidingTtl,
    maxLifetimeMs: config.maxLifetimeSeconds * 1000,
  };
}

/**
 * The instant a member's own session is judged at (src/db/authenticated.ts): its organization's
 * policy may slide or step up where no var does, so the statements that renew and that check the
 * step-up age are built for it, each reading the policy with the var's value as its default (no
 * step-up: the epoch, which every authentication is after).
 */
export function forMember(at: Instant): Instant {
  return {
    ...at,
    slidingMaxLifetimeMs: at.slidingMaxLifetimeMs ?? at.maxLifetimeMs,
    stepUpCutoff: at.stepUpCutoff ?? new Date(0),
  };
}
