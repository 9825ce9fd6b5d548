import { insertSession, insertSupportSession, type NewSession, reauthenticateSession } from "../db/issuing.ts";
import { readPolicyRow } from "../db/organizations/policies.ts";
import type { BucketShard } from "../db/shards.ts";
import {
  type AssuranceLevel,
  checkAssuranceLevel,
  checkFactors,
  type FactorInput,
  latestFactor,
  type StoredFactors,
} from "../domain/auth-factors.ts";
import { checkSessionCarrier, type SessionCarrier, type TokenCarrier } from "../domain/carrier.ts";
import { type ClientContext, clientContext, countryOf } from "../domain/client-context.ts";
import { type Instant, instant } from "../domain/clock.ts";
import { type Config, type Lifetime, MAX_TTL_SECONDS } from "../domain/config.ts";
import { deviceKey } from "../domain/device.ts";
import { newBoundSecret, newChallenge } from "../domain/device-binding.ts";
import { InvalidInput } from "../domain/invalid-input.ts";
import { normalizeIp } from "../domain/ip.ts";
import { checkOrganizationId } from "../domain/organizations/organization.ts";
import { effectivePolicy } from "../domain/organizations/policy.ts";
import type { SupportRefusal } from "../domain/refusal.ts";
import type { Sent } from "../domain/sent.ts";
import { checkSessionData, type SessionData, storedData } from "../domain/session-data.ts";
import { checkSupport, SUPPORT_SESSIONS_PER_USER } from "../domain/support.ts";
import { generateToken, hashSecret, newReportToken, newSessionSecret, type Placement } from "../domain/token.ts";
import { isObject } from "../domain/upstreams/config.ts";
import {
  checkUpstreamSignIn,
  heldByTheProvider,
  notTheSessionsSignIn,
  sessionOrganization,
  type UpstreamSignIn,
  type UpstreamSignInInput,
} from "../domain/upstreams/sign-in.ts";
import { parseDevice } from "../domain/user-agent.ts";
import { isUserId, USER_ID_RULE } from "../domain/user-id.ts";
import { withReportToken } from "./event-message.ts";
import { contextCheck, type Scope, write } from "./scope.ts";
import { readSessionToken } from "./session-token.ts";
import { linkSubject } from "./upstreams/links.ts";
import { upstreamNamed } from "./upstreams/named.ts";

// The one code path that creates sessions (SessionService.create and `npm run session:create`)
// and gives one a new secret (SessionService.reauthenticate).

export interface CreateSessionInput {
  userId: string;
  ipAddress?: string | null;
  userAgent?: string | null;
  ttlSeconds?: number;
  /** The login request's `request.cf.country` (ISO 3166-1 alpha-2). */
  country?: string | null;
  /** The login request's `request.cf.city`. */
  city?: string | null;
  /** The login request's `request.cf.asn`: with the country, the network the session starts on. */
  asn?: number | null;
  /** The login request's `request.cf.latitude` and `.longitude`: where travel is first judged from (both, or none). */
  latitude?: string | number | null;
  longitude?: string | number | null;
  /**
   * The account's home region (e.g. `eu`), one the deployment configures: the session is
   * placed only on that region's databases. Omitted: the default region. The login flow
   * must pass the same region for a user every time (docs/integrating.md, "Regions (data residency)").
   */
  region?: string | null;
  /**
   * What the login flow verified: factors (RFC 8176 `amr` values, src/domain/auth-factors.ts), each
   * completed now or at the `completedAt` given. `authenticate` returns them.
   */
  factors?: FactorInput[];
  /** NIST SP 800-63B authenticator assurance level of this sign-in, if the login flow knows it. */
  assuranceLevel?: AssuranceLevel | null;
  /**
   * Offer the browser to bind the session to a key it holds (DBSC): the answer then carries
   * `secureSessionRegistration`, for the login response's `Secure-Session-Registration`
   * header. A browser that cannot bind ignores it, and its session stays an ordinary one.
   */
  deviceBound?: boolean;
  /**
   * What will carry the token (src/domain/carrier.ts): `cookie` for a browser (the token then
   * proves nothing as Bearer, and its use is judged by its context), `bearer` for an app, a
   * backend or a CLI, `both` for a browser whose token is also sent as Bearer. Omitted: either,
   * never judged.
   */
  carrier?: SessionCarrier | null;
  /**
   * Application data (src/domain/session-data.ts): a JSON object of at most 2 KB that
   * `authenticate` and whoami answer with the session, and access tokens carry the keys of
   * ACCESS_TOKEN_DATA_CLAIMS of. Omitted (or `{}`): none. Replaced or patched later by
   * `updateSessionData`.
   */
  data?: SessionData;
  /**
   * The identity provider the login flow signed the user in through (src/domain/upstreams/sign-in.ts):
   * its name in SSF_UPSTREAMS, and its ID token's `sub` and `sid`. Its back-channel logout and
   * global token revocation then end this session. With its `session_expiry`, the session never
   * outlives it; its `auth_time` and `amr` are factors, its `acr` a level (through the upstream's
   * `acr_levels`) when `assuranceLevel` is not given. Omitted: none.
   */
  upstream?: UpstreamSignInInput | null;
  /**
   * The organization the user signs in to (docs/organizations.md), by its id: its policy governs
   * the session, its admin keys reach it. Set now and never changed. One that does not exist is
   * refused (checked in the create's own batch), nothing written. Omitted: outside any.
   */
  organization?: string | null;
}

/**
 * A session as issued, in plain values, which ./login-response.ts turns into what a login
 * response carries: the Set-Cookie values and the DBSC registration header.
 */
export interface IssuedSession {
  id: string;
  token: string;
  expiresAt: string;
  /** Seconds from issuing to `expiresAt`. */
  expiresIn: number;
  /** Seconds from issuing to the provider's `session_expiry`, the furthest a sliding renewal reaches; null without one. */
  upstreamExpiresIn: number | null;
  /**
   * No session of this user seen within the events retention period (live or ended) had
   * the same device (src/domain/device.ts) and country: time for a "new sign-in" message.
   */
  newDevice: boolean;
  /** With `deviceBound: true`, else null: the challenge the browser's registration must sign. */
  challenge: string | null;
  /** With `deviceBound: true`, else null: the first bound cookie's value. */
  boundSecret: string | null;
  /** Only when `newDevice`: the sign-in's report token (src/services/report.ts), for the "new sign-in" message. */
  reportToken?: string;
  /** The rules its cookie lasts by: the vars', or its organization's policy's. */
  lifetime: Lifetime;
}

export const MAX_USER_AGENT_LENGTH = 512;
export const MAX_CITY_LENGTH = 100;

function cleanCity(city: unknown): string | null {
  // Control characters have no place in a label shown to users.
  const cleaned =
    typeof city === "string"
      ? city
          .replace(/\p{Cc}/gu, "")
          .trim()
          .slice(0, MAX_CITY_LENGTH)
      : "";
  return cleaned || null;
}

/** Cut to `max` UTF-16 units without leaving half a surrogate pair behind. */
function truncate(text: string, max: number): string {
  const cut = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/** Seconds from `now` to `end`, rounded up. */
function secondsUntil(end: Date, now: Date): number {
  return Math.ceil((end.getTime() - now.getTime()) / 1000);
}

/** The user id rule (src/domain/user-id.ts), refused as InvalidInput naming it. */
export function checkUserId(userId: unknown): string {
  if (!isUserId(userId)) {
    throw new InvalidInput(`userId must be ${USER_ID_RULE}`);
  }
  return userId;
}

/** A session's lifetime in seconds: a whole number from 1 to `max`, which `limit` may name. */
function checkTtl(ttlSeconds: unknown, max: number, limit = ""): number {
  if (typeof ttlSeconds !== "number" || !Number.isSafeInteger(ttlSeconds) || ttlSeconds <= 0 || ttlSeconds > max)
    throw new InvalidInput(`ttlSeconds must be an integer from 1 to ${max}${limit}`, RangeError);
  return ttlSeconds;
}

/** A session as issued, before it is stored: its row, and what the caller is given. */
export interface NewSessionRow {
  row: NewSession;
  issued: Omit<IssuedSession, "newDevice">;
  /** Where the sign-in came from, as its row first records it. */
  context: ClientContext;
}

/** The login flow's factors and the provider's, the later proof of each factor kept. */
function mergedFactors(own: StoredFactors | null, provider: StoredFactors | null): StoredFactors | null {
  if (provider === null) return own;
  const merged: StoredFactors = { ...provider };
  for (const [factor, at] of Object.entries(own ?? {}) as [keyof StoredFactors, number][])
    merged[factor] = Math.max(merged[factor] ?? 0, at);
  return merged;
}

/**
 * What a sign-in proved, `create`'s and `reauthenticate`'s one rule: the login flow's factors and
 * level, and the provider's beside them (the later proof of each factor; the login flow's level first).
 */
function signInProof(
  input: Sent<Pick<CreateSessionInput, "factors" | "assuranceLevel">>,
  signIn: UpstreamSignIn | null,
  now: Date,
  required: boolean,
) {
  const factors = mergedFactors(checkFactors(input.factors, now, required), signIn?.factors ?? null);
  const assuranceLevel = checkAssuranceLevel(input.assuranceLevel) ?? signIn?.assuranceLevel ?? null;
  return { factors, assuranceLevel };
}

/**
 * The upstream sign-in a call names, checked; read only when given: a mistake in SSF_UPSTREAMS
 * must not stop the others. Its provider is the var's entry, or an organization's acting
 * provider (one planned round trip when the isolate does not keep it).
 */
async function upstreamSignIn(scope: Scope, upstream: unknown): Promise<UpstreamSignIn | null> {
  if (upstream == null) return null;
  const named = await upstreamNamed(scope, isObject(upstream) ? upstream.provider : undefined);
  return checkUpstreamSignIn(upstream, named ? [named] : [], scope.at.now);
}

/**
 * `check`'s rules judged as the caller's once a provider was read for them (its absence is what
 * the database answered): their InvalidInput is thrown as needing what is stored, so the entry
 * point answers it as the caller's, not as a stored value's failure (`judgingInput`).
 */
async function judgedAfterRead<T>(scope: Scope, before: number, check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (error) {
    if (error instanceof InvalidInput && !error.needsStored && scope.roundTrips() > before)
      throw new InvalidInput(error.message, error.thrownAs, true);
    throw error;
  }
}

/**
 * Checks the input and builds the session's row, its id naming `placement` (the user's
 * region and bucket); `issueSession` stores it (the bench, in bulk). `signIn`: the upstream
 * sign-in as checked, whose `session_expiry` bounds the session and whose factors and level count.
 * `longest`: an organization's own lifetime, which no member's session is issued past.
 */
export async function buildSession(
  config: Config,
  input: Sent<CreateSessionInput>,
  placement: Placement,
  at: Instant = instant(config),
  signIn: UpstreamSignIn | null = null,
  longest: number | null = null,
): Promise<NewSessionRow> {
  const userId = checkUserId(input.userId);
  const { factors, assuranceLevel } = signInProof(input, signIn, at.now, false);
  const carrier = checkSessionCarrier(input.carrier);
  if (input.deviceBound !== undefined && typeof input.deviceBound !== "boolean")
    throw new InvalidInput("deviceBound must be a boolean");
  // A device-bound session is proven only beside its bound cookie, which no Bearer call carries.
  if (input.deviceBound && carrier === "bearer")
    throw new InvalidInput('deviceBound needs a carrier other than "bearer"');
  const data = input.data === undefined ? null : storedData(checkSessionData(input.data).data);
  const challenge = input.deviceBound ? newChallenge() : null;
  const boundSecret = input.deviceBound ? newBoundSecret() : null;
  const ttlSeconds = Math.min(
    checkTtl(input.ttlSeconds ?? config.ttlSeconds, Math.min(MAX_TTL_SECONDS, config.maxLifetimeSeconds)),
    longest ?? MAX_TTL_SECONDS,
  );
  const organizationId = organizationOf(input, signIn);
  const { id, secret, token } = generateToken(placement, organizationId !== null);
  const createdAt = at.now;
  const ownEnd = createdAt.getTime() + ttlSeconds * 1000;
  const upstreamEnd = signIn?.sessionExpiry ?? null;
  const expiresAt = new Date(upstreamEnd === null ? ownEnd : Math.min(ownEnd, upstreamEnd.getTime()));
  const userAgent = typeof input.userAgent === "string" ? truncate(input.userAgent, MAX_USER_AGENT_LENGTH) : "";
  const device = parseDevice(userAgent);
  const country = countryOf(input.country);
  // Where the session starts: its first use elsewhere is a change (src/domain/client-context.ts).
  const { latitude, longitude } = input;
  const seen = clientContext({ userAgent, country, asn: input.asn, latitude, longitude });
  const row: NewSession = {
    id,
    secretHash: await hashSecret(secret),
    userId,
    ipAddress: normalizeIp(input.ipAddress),
    userAgent,
    browser: device.browser,
    os: device.os,
    deviceType: device.type,
    country,
    city: cleanCity(input.city),
    createdAt,
    expiresAt,
    lastActiveAt: createdAt,
    ttlSeconds,
    deviceKey: deviceKey(seen, country),
    authProofs: factors,
    assuranceLevel,
    authenticatedAt: new Date(latestFactor(factors) ?? createdAt.getTime()),
    dbscChallenge: challenge,
    boundCookieHash: boundSecret && (await hashSecret(boundSecret)),
    boundCookieExpiresAt: boundSecret ? new Date(createdAt.getTime() + config.boundCookieSeconds * 1000) : null,
    seenBrowser: seen.browser,
    seenOs: seen.os,
    seenCountry: seen.country,
    seenAsn: seen.asn,
    seenLatitude: seen.latitude,
    seenLongitude: seen.longitude,
    seenPlaceAt: seen.latitude === null ? null : createdAt,
    carrier,
    data,
    organizationId,
    ...(signIn && {
      upstream: signIn.upstream.name,
      upstreamSubject: signIn.subject,
      upstreamSid: signIn.sid,
      upstreamExpiresAt: upstreamEnd,
    }),
  };
  const expiresIn = secondsUntil(expiresAt, createdAt);
  const upstreamExpiresIn = upstreamEnd && secondsUntil(upstreamEnd, createdAt);
  return {
    row,
    issued: {
      id,
      token,
      expiresAt: expiresAt.toISOString(),
      expiresIn,
      upstreamExpiresIn,
      challenge,
      boundSecret,
      lifetime: { slidingTtl: config.slidingTtl, maxLifetimeSeconds: config.maxLifetimeSeconds },
    },
    context: seen,
  };
}

/**
 * The settings a member's session is issued with: its organization's policy on the user's
 * database (the one its batch writes to), in a round trip before the batch, which holds the
 * session to the row still being there. The rules the caller's input is checked by follow from
 * it, so a refusal then is still the caller's (`needsStored`).
 */
async function memberSettings(
  scope: Scope,
  shard: BucketShard,
  organizationId: string,
): Promise<{ config: Config; longest: number | null }> {
  scope.plannedRoundTrip();
  const row = await readPolicyRow(shard.db, organizationId);
  if (!row) throw organizationNotFound(organizationId);
  // The policy's settings carry the vars' names (src/domain/organizations/policy.ts); its own
  // lifetime, when it sets one, is also the longest a `ttlSeconds` gets (src/db/liveness.ts).
  return { config: { ...scope.config, ...effectivePolicy(row, scope.config) }, longest: row.ttlSeconds };
}

export async function issueSession(scope: Scope, input: Sent<CreateSessionInput>): Promise<IssuedSession> {
  const { at } = scope;
  const shard = await scope.shards.forUser(checkUserId(input?.userId), input.region);
  const before = scope.roundTrips();
  const { signIn, member, row, issued, context } = await judgedAfterRead(scope, before, async () => {
    const signIn = await upstreamSignIn(scope, input.upstream);
    const organizationId = organizationOf(input, signIn);
    const member = organizationId === null ? null : await memberSettings(scope, shard, organizationId);
    const config = member?.config ?? scope.config;
    return { signIn, member, ...(await buildSession(config, input, shard.placement, at, signIn, member?.longest)) };
  });
  const config = member?.config ?? scope.config;
  if (signIn) {
    // Before the session: a logout that follows this answer finds the user.
    const user = { userId: row.userId, region: shard.placement.region };
    await linkSubject(scope, signIn.upstream, signIn.subject, user, { ipAddress: row.ipAddress ?? null, context });
  }
  const policy = {
    maxPerUser: config.maxPerUser,
    seenSince: new Date(row.createdAt.getTime() - config.eventRetentionDays * 86_400_000),
  };
  // Drawn for every sign-in, kept (hashed) only by a new device's: the batch judges which.
  const report = newReportToken(row.id);
  const session = { ...row, reportHash: await hashSecret(report.secret) };
  const { stored, newDevice, organizationFound } = await write(
    scope,
    null,
    async (writer) => withReportToken(await insertSession(shard, session, writer, policy, at), report.token),
    row.ipAddress ?? null,
  );
  if (!organizationFound) throw organizationNotFound(row.organizationId);
  // Only if 128 random bits collided with a live session's id; the caller can simply retry.
  if (!stored) throw new Error("A session with this id already exists. Retry.");
  return newDevice ? { ...issued, newDevice, reportToken: report.token } : { ...issued, newDevice };
}

/** The organization `create` names, or that of the provider it signed in through (they must agree); null: none. */
function organizationOf(input: Sent<CreateSessionInput>, signIn: UpstreamSignIn | null): string | null {
  return sessionOrganization(
    input.organization == null ? null : checkOrganizationId(input.organization, "organization"),
    signIn,
  );
}

/** The caller named an organization the user's database has no policy row of: none of this id exists. */
function organizationNotFound(id: string | null | undefined): InvalidInput {
  return new InvalidInput(`organization ${id} names no organization of this service`, RangeError, true);
}

/** A support session (src/domain/support.ts): who it is for, who acts in it and why. */
export interface OpenSupportInput {
  userId: string;
  /** The support agent's own user id: named to the user in their list and log. */
  agentId: string;
  /** Why: a ticket or a sentence, at most 200 characters, shown to the user. */
  reason: string;
  /** At most (and by default) SESSION_SUPPORT_MAX_SECONDS. */
  ttlSeconds?: number;
  /** The user's home region, as given to `create`. */
  region?: string | null;
  /** The support tool's request, as for `create`: where the agent works from. */
  ipAddress?: string | null;
  userAgent?: string | null;
  /** As for `create`: what will carry the token. */
  carrier?: SessionCarrier | null;
  /**
   * As for `create`: the application data the product needs to serve the session (a tenant,
   * an organisation), so the agent sees what the user sees. Set by the support tool, a server.
   */
  data?: SessionData;
}

/**
 * Opens a support session, one round trip: an ordinary session's row with the agent and the
 * reason, which never slides and is never renewed. A user this service does not know (no
 * session, nothing in the log within the retention) and a user with SUPPORT_SESSIONS_PER_USER
 * open ones are refused (a SupportRefusal, which the entry point answers); nothing is written.
 */
export async function openSupportSession(
  scope: Scope,
  input: Sent<OpenSupportInput>,
): Promise<
  Omit<IssuedSession, "newDevice" | "challenge" | "boundSecret" | "upstreamExpiresIn" | "lifetime"> | SupportRefusal
> {
  const { config, at } = scope;
  const userId = checkUserId(input?.userId);
  const support = checkSupport(userId, input.agentId, input.reason);
  const max = config.supportMaxSeconds;
  const ttlSeconds = checkTtl(input.ttlSeconds ?? max, max, " (SESSION_SUPPORT_MAX_SECONDS)");
  const shard = await scope.shards.forUser(userId, input.region);
  const base = {
    userId,
    ipAddress: input.ipAddress,
    userAgent: input.userAgent,
    carrier: input.carrier,
    ttlSeconds,
    data: input.data,
  };
  const { row, issued } = await buildSession(config, base, shard.placement, at);
  const session = { ...row, supportAgent: support.sub, supportReason: support.reason };
  const { stored, refused } = await write(
    scope,
    null,
    (writer) => insertSupportSession(shard, session, writer, SUPPORT_SESSIONS_PER_USER, at),
    row.ipAddress ?? null,
  );
  if (refused) return refused;
  if (!stored) throw new Error("A session with this id already exists. Retry.");
  const { id, token, expiresAt, expiresIn } = issued;
  return { id, token, expiresAt, expiresIn };
}

export interface ReauthenticateInput {
  /** The session's current token; it stops working once this succeeds. */
  token: string;
  /** The factors just verified, as for `create`: at least one, unless `upstream` gives its `auth_time` or `amr`. */
  factors?: FactorInput[];
  assuranceLevel?: AssuranceLevel | null;
  /**
   * The provider's fresh sign-in, as for `create`, after which the login flow re-authenticates
   * (how a hold the provider asked for is lifted, by an `auth_time` after it): `provider` and
   * `subject` must be the session's own, its `sid` replaces the stored one (none given keeps it),
   * `auth_time` and `amr` are factors, `acr` a level, and a `session_expiry` the session's new
   * limit (its own end renewed now with a sliding lifetime).
   */
  upstream?: UpstreamSignInInput | null;
}

/** The same session with a new secret, in plain values (./login-response.ts adds its cookie). */
export interface ReissuedSession {
  sessionId: string;
  /** The new token; the old one is dead. */
  token: string;
  expiresAt: string;
  /** Seconds from now to `expiresAt`. */
  expiresIn: number;
  /** Seconds from now to the provider's `session_expiry`, the furthest a sliding renewal reaches; null without one. */
  upstreamExpiresIn: number | null;
  /** As `IssuedSession`'s. */
  lifetime: Lifetime;
}

/**
 * The user proved who they are again: records the factors and gives the session a new secret
 * (OWASP ASVS V7.2.4), in one round trip. `carrier`: what carried the token, if the caller says.
 * `cookieHeader`: the `Cookie` header that came with the token, whose bound cookie a device-bound session needs. Null when the token does not
 * prove a live session: nothing changed, and a dead session stays dead. An upstream sign-in of
 * another provider or subject than the session's, and anything but the provider's sign-in after
 * a hold it asked for, are refused (InvalidInput), nothing changed.
 */
export async function reauthenticate(
  scope: Scope,
  input: Sent<ReauthenticateInput>,
  carrier: TokenCarrier,
  cookieHeader: string | undefined,
): Promise<ReissuedSession | null | "support"> {
  const { config, at } = scope;
  const before = scope.roundTrips();
  const { signIn, proven } = await judgedAfterRead(scope, before, async () => {
    const signIn = await upstreamSignIn(scope, input?.upstream);
    // A factor is recorded either way: the login flow's, or the provider's.
    return { signIn, proven: signInProof(input, signIn, at.now, signIn?.factors == null) };
  });
  const factors = proven.factors as StoredFactors;
  const session = await readSessionToken(scope.shards, input.token, carrier, {
    header: cookieHeader,
    name: config.cookieName,
  });
  if (!session) return null;
  const { shard, proof } = session;
  const { secret, token } = newSessionSecret(proof.id, proof.member);
  const upstream = signIn && {
    provider: signIn.upstream.name,
    subject: signIn.subject,
    sid: signIn.sid,
    sessionExpiry: signIn.sessionExpiry,
    authTime: signIn.authTime,
  };
  const change = { secretHash: await hashSecret(secret), factors, assuranceLevel: proven.assuranceLevel, upstream };
  const changed = await write(
    scope,
    proof.id,
    (writer) => reauthenticateSession(shard, proof, change, writer, at, contextCheck(scope), scope.reach),
    null,
  );
  if (changed === "support") return changed;
  if (changed === "another_sign_in") throw notTheSessionsSignIn();
  if (changed === "held_by_upstream") throw heldByTheProvider();
  if (!changed) return null;
  return {
    sessionId: proof.id,
    token,
    expiresAt: changed.expiresAt.toISOString(),
    expiresIn: secondsUntil(changed.expiresAt, at.now),
    upstreamExpiresIn: changed.upstreamExpiresAt && secondsUntil(changed.upstreamExpiresAt, at.now),
    lifetime: changed.lifetime ?? config,
  };
}
