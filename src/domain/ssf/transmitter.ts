import { ConfigError, parsedOnce } from "../config.ts";
import { signJws } from "../jws.ts";
import { issuerOf, type KeySet, keySetOf } from "../signing-keys.ts";
import { DELIVERY_URNS, STREAMS_PATH } from "./streams.ts";

// This service as a Shared Signals transmitter (OpenID SSF 1.0): who it is (SSF_ISSUER) and
// the keys its Security Event Tokens are signed with (the secret SSF_SIGNING_KEYS, a key set as
// src/domain/signing-keys.ts reads it). Without an issuer the transmitter is off and its paths
// answer 404.

/** The discovery document's path (SSF 1.0 §"Transmitter Configuration Discovery"). */
export const CONFIGURATION_PATH = "/.well-known/ssf-configuration";
export const JWKS_PATH = "/ssf/jwks.json";
/**
 * Caches may keep the discovery documents this long; a key rotated out must stay published
 * longer (`npm run ssf:keys -- rotate --overlap`), or a cached key set could lack a live key.
 */
export const DISCOVERY_MAX_AGE_SECONDS = 300;

export interface Transmitter extends KeySet {
  /** `https://host` (or `http://` on a loopback host, for development), no path. */
  issuer: string;
  /** How long a SET waits for its stream (polled, acknowledged or pushed) before it is dropped. */
  retentionDays: number;
}

export interface TransmitterVars {
  SSF_ISSUER?: string;
  SSF_SIGNING_KEYS?: string;
  SSF_SET_RETENTION_DAYS?: string;
}

const DEFAULT_RETENTION_DAYS = 7;

function retentionDaysOf(value: string | undefined): number {
  const days = value === undefined || value === "" ? DEFAULT_RETENTION_DAYS : Number(value);
  if (!Number.isSafeInteger(days) || days < 1 || days > 365)
    throw new ConfigError("SSF_SET_RETENTION_DAYS must be an integer from 1 to 365");
  return days;
}

// Read on every request: the outbox asks whether streams are configured.
const transmitterOf = parsedOnce((issuer: string, keys: string | undefined, retention: string | undefined) => {
  const origin = issuerOf("SSF_ISSUER", issuer);
  if (!keys) throw new ConfigError("SSF_SIGNING_KEYS must be set when SSF_ISSUER is");
  return {
    issuer: origin,
    ...keySetOf("SSF_SIGNING_KEYS", keys),
    retentionDays: retentionDaysOf(retention),
  };
});

/**
 * The transmitter the vars describe, null when SSF_ISSUER is empty. Throws a ConfigError that
 * names the var and its rule, never a value.
 */
export function readTransmitter(vars: TransmitterVars): Transmitter | null {
  if (!vars.SSF_ISSUER) return null;
  return transmitterOf(vars.SSF_ISSUER, vars.SSF_SIGNING_KEYS, vars.SSF_SET_RETENTION_DAYS);
}

/** The transmitter configuration metadata (SSF 1.0): what a receiver discovers first. */
export function transmitterMetadata(transmitter: Transmitter) {
  const streams = `${transmitter.issuer}${STREAMS_PATH}`;
  return {
    spec_version: "1_0",
    issuer: transmitter.issuer,
    jwks_uri: `${transmitter.issuer}${JWKS_PATH}`,
    delivery_methods_supported: [DELIVERY_URNS.push, DELIVERY_URNS.poll],
    configuration_endpoint: streams,
    status_endpoint: `${streams}/status`,
    add_subject_endpoint: `${streams}/subjects/add`,
    remove_subject_endpoint: `${streams}/subjects/remove`,
    verification_endpoint: `${streams}/verify`,
    // Operator-issued bearer credentials (`npm run ssf:receivers`), sent as RFC 6750 says.
    authorization_schemes: [{ spec_urn: "urn:ietf:rfc:6750" }],
  };
}

/**
 * Signs a SET for a receiver (RFC 8417, SSF 1.0 §4): the stored claims plus the issuer, the
 * receiver's audience and the time it is sent. Explicitly typed `secevent+jwt`; never an `exp`.
 */
export function signSet(
  transmitter: Transmitter,
  audience: string,
  claims: Record<string, unknown>,
  at: Date,
): Promise<string> {
  return signJws(
    { iss: transmitter.issuer, aud: audience, iat: Math.floor(at.getTime() / 1000), ...claims },
    transmitter.signer,
    { typ: "secevent+jwt" },
  );
}
