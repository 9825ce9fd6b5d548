// A reference verifier of the session service's access tokens, for a product to copy (README.md
// beside it). It verifies a token with `jose` against the service's published key set, and
// refuses one whose session has ended: it hears every CAEP `session-revoked` on a Shared Signals
// stream of its own, polled (RFC 8936) or pushed (RFC 8935), and keeps the ended sessions' ids
// (`sid`) only as long as a token of theirs could still verify. Plain `fetch` and `jose`: it runs
// on Node 22 and in a Worker alike. The service's side: docs/access-tokens.md.
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from "jose";

export const SESSION_REVOKED = "https://schemas.openid.net/secevent/caep/event-type/session-revoked";
const POLL = "urn:ietf:rfc:8936";
const PUSH = "urn:ietf:rfc:8935";
const ALGORITHMS = ["ES256", "RS256"];
/** The service's key sets say `Cache-Control: max-age=300`; jose's own default would keep them 10 minutes. */
const KEYS_MAX_AGE_MS = 300_000;
/** A SET is a few hundred bytes; the service takes inbound ones up to 16 KB. */
const MAX_PUSH_BYTES = 64 * 1024;

export interface VerifierOptions {
  /** The tokens' `iss`: the service's ACCESS_TOKEN_ISSUER. */
  issuer: string;
  /** This service's name among the tokens' `aud` (ACCESS_TOKEN_AUDIENCE), one or more accepted. */
  audience: string | string[];
  /** The key set; `<issuer>/.well-known/jwks.json` when absent. */
  jwksUrl?: string;
  /**
   * The longest a token lives (`exp - iat`): a longer one is refused, and an ended session is
   * remembered this long (plus the tolerance), which bounds the memory. 600 s, the service's
   * ceiling for ACCESS_TOKEN_TTL_SECONDS, fits any configuration of it.
   */
  maxTokenLifetimeSeconds?: number;
  /** Clock skew allowed on `exp` (and `nbf`): a token verifies until `exp` plus this. 5 s. */
  clockToleranceSeconds?: number;
  /** Where revocations come from; without it, a token of an ended session verifies until its `exp`. */
  ssf?: SsfOptions;
  /** A poll that failed, a SET refused; `console.warn` when absent. */
  onError?: (error: unknown) => void;
}

export interface SsfOptions {
  /** The transmitter's `/.well-known/ssf-configuration`. */
  configurationUrl: string;
  /** The receiver credential (`npm run ssf:receivers -- issue`): `<id>.<secret>`. */
  credential: string;
  /** That credential's audience: every SET's `aud`. */
  audience: string;
  /**
   * Poll (every `intervalMs`, 1000 by default) or push (to `endpointUrl`, which answers with
   * `receivePush`; `authorization` is the header the transmitter must send with every push).
   */
  delivery: { method: "poll"; intervalMs?: number } | { method: "push"; endpointUrl: string; authorization?: string };
  /** Names this verifier's stream, found again on the next start: one stream per verifier process. */
  description?: string;
}

/** Why a token is refused; `code` is what a 401's `error` says (`invalid_token`) or finer. */
export class TokenRefused extends Error {
  override name = "TokenRefused";
  readonly code: "invalid_token" | "session_revoked";
  constructor(code: TokenRefused["code"], message: string) {
    super(message);
    this.code = code;
  }
}

/** What an RFC 8935 push is answered: 202, 400 with its error, or 503 to have it sent again. */
export interface PushAnswer {
  status: 202 | 400 | 503;
  body?: { err: string; description: string };
}

interface Stream {
  stream_id: string;
  events_delivered: string[];
  delivery: { method: string; endpoint_url?: string };
  description?: string;
}

type Claims = JWTPayload & { sid: string; sub: string; exp: number; iat: number };

export function createVerifier(options: VerifierOptions) {
  const maxLifetime = options.maxTokenLifetimeSeconds ?? 600;
  const tolerance = options.clockToleranceSeconds ?? 5;
  const tokenKeys = createRemoteJWKSet(new URL(options.jwksUrl ?? `${options.issuer}/.well-known/jwks.json`), {
    cacheMaxAge: KEYS_MAX_AGE_MS,
  });
  const onError = options.onError ?? ((error: unknown) => console.warn("token verifier:", error));
  /** Ended sessions: sid → when to forget it (epoch ms), once no token of it can verify any more. */
  const revoked = new Map<string, number>();
  let transmitter: { issuer: string; keys: ReturnType<typeof createRemoteJWKSet> } | null = null;
  let stream: Stream | null = null;
  let polling: { stop: boolean; wake?: () => void; done?: Promise<void> } | null = null;
  let lastPollAt: number | null = null;
  /** SETs handled since the last poll: acknowledged, or refused, in the next one. */
  let acks: string[] = [];
  const setErrs: Record<string, { err: string; description: string }> = {};

  function forgetEnded(now: number) {
    for (const [sid, until] of revoked) if (until <= now) revoked.delete(sid);
  }

  /** A session ended at `at` (epoch s, the SET's event_timestamp) or earlier: remembered past every token of it. */
  function remember(sid: string, at?: number) {
    const now = Date.now();
    const since = Math.max(now, typeof at === "number" ? at * 1000 : 0);
    revoked.set(sid, Math.max(revoked.get(sid) ?? 0, since + (maxLifetime + tolerance) * 1000));
    forgetEnded(now);
  }

  /** A SET: verified as the transmitter's, for this receiver; a session-revoked's session remembered. */
  async function handleSet(set: string): Promise<void> {
    if (!transmitter || !options.ssf) throw new Error("not started");
    const { payload } = await jwtVerify(set, transmitter.keys, {
      issuer: transmitter.issuer,
      audience: options.ssf.audience,
      typ: "secevent+jwt",
      algorithms: ALGORITHMS,
    });
    const events = (payload.events ?? {}) as Record<string, { subject?: unknown; event_timestamp?: number }>;
    const event = events[SESSION_REVOKED];
    if (!event) return; // a verification SET, or a type this verifier does not act on
    // SSF 1.0 puts the subject in the top-level sub_id; CAEP's older SETs in the event.
    const subject = (payload.sub_id ?? event.subject) as { format?: string; session?: { id?: unknown } } | undefined;
    const sid = subject?.format === "complex" ? subject.session?.id : undefined;
    if (typeof sid === "string") remember(sid, event.event_timestamp);
  }

  async function ssfCall(method: string, url: string, body?: unknown): Promise<unknown> {
    const ssf = options.ssf as SsfOptions;
    const response = await fetch(url, {
      method,
      headers: {
        Authorization: `Bearer ${ssf.credential}`,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok) throw new Error(`${method} ${url} answered ${response.status}: ${await response.text()}`);
    return response.status === 204 ? null : response.json();
  }

  /** One poll: acknowledges what was handled, takes up to 100 SETs; whether more are waiting. */
  async function pollOnce(): Promise<boolean> {
    const url = stream?.delivery.endpoint_url;
    if (!url || stream?.delivery.method !== POLL) throw new Error("no poll stream: call start() first");
    const [ack, errs] = [[...acks], { ...setErrs }];
    const answer = (await ssfCall("POST", url, {
      ack,
      ...(Object.keys(errs).length === 0 ? {} : { setErrs: errs }),
      maxEvents: 100,
      returnImmediately: true,
    })) as { sets: Record<string, string>; moreAvailable?: boolean };
    acks = acks.slice(ack.length);
    for (const jti of Object.keys(errs)) delete setErrs[jti];
    lastPollAt = Date.now();
    for (const [jti, set] of Object.entries(answer.sets ?? {})) {
      try {
        await handleSet(set);
        acks.push(jti);
      } catch (error) {
        onError(error);
        // Refused for good: the transmitter logs it and stops offering it. Anything else (the
        // transmitter's keys out of reach) is neither: the SET comes again a minute later.
        if (isRefusal(error)) setErrs[jti] = { err: setError(error), description: "The SET did not verify" };
      }
    }
    return answer.moreAvailable === true;
  }

  async function pollLoop(state: NonNullable<typeof polling>, intervalMs: number) {
    let wait = intervalMs;
    while (!state.stop) {
      try {
        wait = (await pollOnce()) ? 0 : intervalMs;
      } catch (error) {
        onError(error);
        wait = Math.min(Math.max(wait * 2, intervalMs), 30_000);
      }
      if (wait > 0 && !state.stop)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          state.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
    }
  }

  /** This verifier's stream: the one its description names if there is one, else a new one. */
  async function ownStream(endpoint: string, ssf: SsfOptions): Promise<Stream> {
    const description = ssf.description ?? "token verifier";
    const delivery =
      ssf.delivery.method === "poll"
        ? { method: POLL }
        : {
            method: PUSH,
            endpoint_url: new URL(ssf.delivery.endpointUrl).href,
            ...(ssf.delivery.authorization === undefined ? {} : { authorization_header: ssf.delivery.authorization }),
          };
    const streams = (await ssfCall("GET", endpoint)) as Stream[];
    const mine = streams.find(
      (found) => found.description === description && found.delivery.method === delivery.method,
    );
    if (!mine)
      return (await ssfCall("POST", endpoint, {
        events_requested: [SESSION_REVOKED],
        delivery,
        description,
      })) as Stream;
    // Found again: what it delivers and where are set anew (a push's authorization is never shown back).
    return (await ssfCall("PATCH", endpoint, {
      stream_id: mine.stream_id,
      events_requested: [SESSION_REVOKED],
      ...(delivery.method === PUSH ? { delivery } : {}),
    })) as Stream;
  }

  /**
   * A pushed SET (RFC 8935): the request's body and headers, answered as the transmitter
   * expects. For a Worker: `receivePush(await request.text(), Object.fromEntries(request.headers))`.
   */
  async function receivePush(
    body: string,
    headers: Record<string, string | string[] | undefined>,
  ): Promise<PushAnswer> {
    const refuse = (err: string, description: string): PushAnswer => ({ status: 400, body: { err, description } });
    const delivery = options.ssf?.delivery;
    if (delivery?.method !== "push") return refuse("access_denied", "This verifier takes no pushes");
    if (delivery.authorization !== undefined && headers.authorization !== delivery.authorization)
      return refuse("authentication_failed", "The Authorization header is not the stream's");
    const type = String(headers["content-type"] ?? "")
      .split(";")[0]
      ?.trim()
      .toLowerCase();
    if (type !== "application/secevent+jwt")
      return refuse("invalid_request", "The body must be application/secevent+jwt");
    try {
      await handleSet(body);
      return { status: 202 };
    } catch (error) {
      onError(error);
      // Not the SET's fault: a 5xx, which the transmitter tries again.
      if (!isRefusal(error)) return { status: 503 };
      return refuse(setError(error), "The SET did not verify");
    }
  }

  return {
    /**
     * The key sets, discovery, this verifier's stream (found or created), and for poll the
     * first poll and the polling loop. Without `ssf`, the tokens' key set alone.
     */
    async start(): Promise<void> {
      const ssf = options.ssf;
      if (!ssf) return tokenKeys.reload();
      const response = await fetch(ssf.configurationUrl);
      if (!response.ok) throw new Error(`${ssf.configurationUrl} answered ${response.status}`);
      const metadata = (await response.json()) as { issuer: string; jwks_uri: string; configuration_endpoint: string };
      transmitter = {
        issuer: metadata.issuer,
        keys: createRemoteJWKSet(new URL(metadata.jwks_uri), { cacheMaxAge: KEYS_MAX_AGE_MS }),
      };
      // Both key sets now, rather than on the first token and the first SET.
      await Promise.all([tokenKeys.reload(), transmitter.keys.reload()]);
      stream = await ownStream(metadata.configuration_endpoint, ssf);
      if (!stream.events_delivered.includes(SESSION_REVOKED))
        throw new Error(`stream ${stream.stream_id} does not deliver session-revoked`);
      if (ssf.delivery.method === "poll") {
        const state: NonNullable<typeof polling> = { stop: false };
        await pollOnce(); // what waited since the last run, before the first token is verified
        state.done = pollLoop(state, ssf.delivery.intervalMs ?? 1000);
        polling = state;
      }
    },

    /** Stops polling, after acknowledging what was handled. */
    async stop(): Promise<void> {
      if (!polling) return;
      polling.stop = true;
      polling.wake?.();
      await polling.done;
      polling = null;
      if (acks.length > 0 || Object.keys(setErrs).length > 0) {
        const url = stream?.delivery.endpoint_url as string;
        await ssfCall("POST", url, { ack: acks, setErrs, maxEvents: 0, returnImmediately: true }).catch(onError);
      }
    },

    /** The token's claims, or TokenRefused: a bad token, or one whose session has ended. */
    async verify(token: string): Promise<Claims> {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, tokenKeys, {
          issuer: options.issuer,
          audience: options.audience,
          typ: "at+jwt",
          algorithms: ALGORITHMS,
          clockTolerance: tolerance,
          requiredClaims: ["exp", "iat", "sub", "sid", "jti"],
        }));
      } catch (error) {
        throw new TokenRefused("invalid_token", error instanceof Error ? error.message : String(error));
      }
      const claims = payload as Claims;
      if (typeof claims.sid !== "string") throw new TokenRefused("invalid_token", "sid is not a string");
      if (claims.exp - claims.iat > maxLifetime) throw new TokenRefused("invalid_token", "lives longer than allowed");
      const until = revoked.get(claims.sid);
      if (until !== undefined && until > Date.now()) throw new TokenRefused("session_revoked", "the session has ended");
      return claims;
    },

    receivePush,

    /** For node:http: `createServer(verifier.pushListener)`, or call it for the push path alone. */
    pushListener: (request: IncomingMessage, response: ServerResponse): void => {
      const chunks: Buffer[] = [];
      let size = 0;
      request.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_PUSH_BYTES) request.destroy();
        else chunks.push(chunk);
      });
      request.on("end", async () => {
        const answer = await receivePush(Buffer.concat(chunks).toString("utf8"), request.headers);
        if (!answer.body) return void response.writeHead(answer.status).end();
        response.writeHead(answer.status, { "Content-Type": "application/json", "Content-Language": "en" });
        response.end(JSON.stringify(answer.body));
      });
    },

    /** What it knows: its stream, the sessions it remembers as ended, when it last polled. */
    status() {
      forgetEnded(Date.now());
      return { streamId: stream?.stream_id ?? null, revokedSessions: revoked.size, lastPollAt };
    },
  };
}

/** Whether the SET itself is at fault (signature, claims, form), rather than reaching the keys. */
function isRefusal(error: unknown): boolean {
  return [
    errors.JWSSignatureVerificationFailed,
    errors.JWTClaimValidationFailed,
    errors.JWSInvalid,
    errors.JWTInvalid,
    errors.JWKSNoMatchingKey,
    errors.JWKSMultipleMatchingKeys,
    errors.JOSEAlgNotAllowed,
    errors.JOSENotSupported,
  ].some((type) => error instanceof type);
}

/** RFC 8935's error code for a SET that did not verify. */
function setError(error: unknown): string {
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === "iss") return "invalid_issuer";
    if (error.claim === "aud") return "invalid_audience";
  }
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWSSignatureVerificationFailed)
    return "invalid_key";
  return "invalid_request";
}
