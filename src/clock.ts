import type { Config } from "./config.ts";

/**
 * The moment a request is judged at. A session is live when it has not expired and, with
 * an idle timeout, was active after `idleCutoff`. Read once per request from the one
 * clock (tests move it with fake timers).
 */
export interface Instant {
  now: Date;
  idleCutoff: Date | null;
}

export function instant(config: Pick<Config, "idleTimeoutSeconds">): Instant {
  const now = new Date();
  const idle = config.idleTimeoutSeconds;
  return { now, idleCutoff: idle > 0 ? new Date(now.getTime() - idle * 1000) : null };
}
