import { ConfigError, parsedOnce } from "../config.ts";
import { SESSION_ESTABLISHED, SESSION_REVOKED } from "../ssf/caep.ts";
import { MAX_AUTHORIZATION_LENGTH } from "../ssf/streams.ts";
import { isObject, type PushedEvent, readUpstreams, type Upstream, type UpstreamVars } from "./config.ts";

// The upstreams that take this service's SETs about the sessions signed in through them (their
// `push` in SSF_UPSTREAMS), as push destinations next to the receivers' streams: their SETs wait
// in ssf_queued_sets under the destination id `upstream:<name>`, which no stream id can be
// (src/db/ssf/queue.ts), and are pushed with the streams' retries. Where to and with which
// `aud` is read from the var when each is pushed; the Authorization from the secret
// SSF_UPSTREAM_AUTHORIZATIONS, a JSON object of upstream name to the header's value.

declare global {
  interface Env {
    /** Secret: a JSON object, each upstream's name to the Authorization its pushes carry. */
    SSF_UPSTREAM_AUTHORIZATIONS?: string;
  }
}

export interface UpstreamReceiverVars extends UpstreamVars {
  SSF_UPSTREAM_AUTHORIZATIONS?: string;
}

export interface UpstreamReceiver {
  upstream: Upstream;
  /** Its queued SETs' `stream_id`. */
  destination: string;
  endpointUrl: string;
  audience: string;
  /** The event type URIs it takes. */
  events: readonly string[];
  /** The Authorization header's value, or null: the signed SET is the only proof. */
  authorization: string | null;
}

const EVENT_URIS: Record<PushedEvent, string> = {
  "session-revoked": SESSION_REVOKED,
  "session-established": SESSION_ESTABLISHED,
};

/**
 * The queued SETs' stream id of an upstream's pushes: `upstream:<name>` for the var's,
 * `provider:<organization>:<name>` for an organization's (the push loop leases those by the
 * prefix alone, and reads each one's provider when it pushes: a SET goes to the provider of that
 * name only while it is still that organization's, never to another's that took the name since).
 */
export const destinationOf = (upstream: Upstream) =>
  upstream.organizationId === null
    ? `${UPSTREAM_PREFIX}${upstream.name}`
    : providerDestination(upstream.organizationId, upstream.name);
/** An organization's provider's destination id, by its organization and name. */
export const providerDestination = (organizationId: string, name: string) =>
  `${PROVIDER_PREFIX}${organizationId}:${name}`;
export const UPSTREAM_PREFIX = "upstream:";
export const PROVIDER_PREFIX = "provider:";

/** An upstream with `push` as a destination of its sessions' SETs, its Authorization beside. */
export function receiverOf(upstream: Upstream, authorization: string | null): UpstreamReceiver | null {
  const { push } = upstream;
  if (push === null) return null;
  return {
    upstream,
    destination: destinationOf(upstream),
    endpointUrl: push.endpointUrl,
    audience: push.audience,
    events: push.events.map((event) => EVENT_URIS[event]),
    authorization,
  };
}

/** What an upstream's push Authorization is, the var's and a runtime provider's alike. */
export const AUTHORIZATION_RULE = `1 to ${MAX_AUTHORIZATION_LENGTH} printable ASCII characters`;

/** A header's value: what the Fetch API would refuse is refused when configured, not at each push. */
export function isAuthorizationValue(value: unknown): value is string {
  return (
    typeof value === "string" &&
    value.length > 0 &&
    value.length <= MAX_AUTHORIZATION_LENGTH &&
    /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value)
  );
}

function authorizationsOf(text: string, receivers: readonly Upstream[]): Map<string, string> {
  const invalid = (rule: string) =>
    new ConfigError(`SSF_UPSTREAM_AUTHORIZATIONS must be a JSON object of upstream name to Authorization: ${rule}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalid("not JSON");
  }
  if (!isObject(parsed)) throw invalid("not an object");
  for (const [name, value] of Object.entries(parsed)) {
    if (!receivers.some((upstream) => upstream.name === name))
      throw invalid("each name is an upstream of SSF_UPSTREAMS with push");
    if (!isAuthorizationValue(value)) throw invalid(`each value is ${AUTHORIZATION_RULE}`);
  }
  return new Map(Object.entries(parsed as Record<string, string>));
}

const receiversFrom = parsedOnce(
  (upstreams: Upstream[], authorizationsText: string | undefined): UpstreamReceiver[] => {
    const pushing = upstreams.filter((upstream) => upstream.push !== null);
    const text = authorizationsText ?? "";
    const authorizations = text.trim() === "" ? new Map<string, string>() : authorizationsOf(text, pushing);
    return pushing.map(
      (upstream) => receiverOf(upstream, authorizations.get(upstream.name) ?? null) as UpstreamReceiver,
    );
  },
);

/**
 * The upstreams with `push`, each with its Authorization; empty for none. Throws a ConfigError
 * naming the var and its rule, never a value.
 */
export function readUpstreamReceivers(vars: UpstreamReceiverVars): UpstreamReceiver[] {
  return receiversFrom(readUpstreams(vars), vars.SSF_UPSTREAM_AUTHORIZATIONS);
}
