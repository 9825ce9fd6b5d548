import { InvalidInput } from "./invalid-input.ts";
import { isObject, type Upstream } from "./upstreams.ts";

// Where a session came from, when the login flow signed the user in through an identity
// provider (an upstream of SSF_UPSTREAMS): the provider, its `sub` and its session id (`sid`),
// as its ID token gave them. Stored with the session, so that the provider's back-channel
// logout ends exactly its sessions (src/domain/upstream-logout.ts).

/** What `create` takes: the provider by its name in SSF_UPSTREAMS, and its ID token's `sub` and `sid`. */
export interface UpstreamSignInInput {
  provider: string;
  subject: string;
  sid?: string | null;
}

/** What a backend is shown of it (whoami, `authenticate`, the admin API's list). */
export interface UpstreamSignInView {
  provider: string;
  subject: string;
  sid: string | null;
}

/** A subject or a session id: what providers use (UUIDs, `auth0|…`, opaque strings) fits well within. */
export const MAX_UPSTREAM_ID_LENGTH = 255;
const MEMBERS = new Set(["provider", "subject", "sid"]);

/** An upstream's subject or session id: 1 to 255 characters, none of them a control character. */
export function isUpstreamId(value: unknown): value is string {
  return (
    typeof value === "string" && value.length > 0 && value.length <= MAX_UPSTREAM_ID_LENGTH && !/\p{Cc}/u.test(value)
  );
}

/**
 * The sign-in checked against the configured upstreams; null when none was given. Throws a
 * InvalidInput naming the rule for anything else: nothing is written.
 */
export function checkUpstreamSignIn(
  input: unknown,
  upstreams: readonly Upstream[],
): { upstream: Upstream; subject: string; sid: string | null } | null {
  if (input === undefined || input === null) return null;
  if (!isObject(input) || Object.keys(input).some((member) => !MEMBERS.has(member)))
    throw new InvalidInput("upstream must be an object of provider, subject and optionally sid");
  const upstream = upstreams.find((candidate) => candidate.name === input.provider);
  if (!upstream)
    throw new InvalidInput("upstream.provider must be the name of an upstream this deployment lists in SSF_UPSTREAMS");
  const rule = `of 1 to ${MAX_UPSTREAM_ID_LENGTH} characters without control characters`;
  if (!isUpstreamId(input.subject)) throw new InvalidInput(`upstream.subject must be a string ${rule}`);
  const sid = input.sid ?? null;
  if (sid !== null && !isUpstreamId(sid)) throw new InvalidInput(`upstream.sid, when given, must be a string ${rule}`);
  return { upstream, subject: input.subject, sid };
}

/** A session's columns of its sign-in. */
export interface UpstreamSignInColumns {
  upstream: string | null;
  upstreamSubject: string | null;
  upstreamSid: string | null;
}

/** A session's stored sign-in as a backend is shown it; null when it has none. */
export function upstreamSignInView(row: UpstreamSignInColumns): UpstreamSignInView | null {
  return row.upstream === null
    ? null
    : { provider: row.upstream, subject: row.upstreamSubject ?? "", sid: row.upstreamSid };
}
