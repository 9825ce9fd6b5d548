/** The one source of "now" for every expiry decision (tests move it with fake timers). */
export function now(): Date {
  return new Date();
}
