import type { Database } from "../../db/client.ts";
import { type ActingProvider, actingProviders } from "../../db/organizations/providers.ts";
import { logLine } from "../../domain/log.ts";
import { storedUpstream } from "../../domain/organizations/providers.ts";
import { isUpstreamName, type Upstream } from "../../domain/upstreams/config.ts";
import { redact } from "../failure-log.ts";

// The organizations' providers as they act, for what names one that SSF_UPSTREAMS does not list
// (src/services/upstreams/named.ts, the push loop): registered at runtime (./providers.ts),
// read from DB by its name and kept per isolate for PROVIDER_CACHE_SECONDS, an answer of none
// too (so a stream of unknown names costs one read each per bound, never one per request).
// A provider disabled or removed, or its organization removed, stops acting in an isolate
// within that bound; in the isolate that made the change, at once (`forgetProvider`). One whose
// stored entry today's validator refuses acts not, logged when read, and never fails the read of
// the others named with it (a push round reads every due provider at once).

/** How long an isolate keeps what it read of a provider (or that there is none): the bound of a change's reach, in seconds. */
export const PROVIDER_CACHE_SECONDS = 30;
/** The most names an isolate keeps; past it the oldest go first. */
const MAX_KEPT = 10_000;

/** An organization's provider as it acts: the upstream, and its push's sealed Authorization. */
export interface RuntimeProvider {
  upstream: Upstream;
  sealedAuthorization: string | null;
}

/** The providers of the names asked for: those that act, and the organization of each refused (it acts not, its SETs wait). */
export interface RuntimeProviders {
  acting: Map<string, RuntimeProvider>;
  refused: Map<string, string>;
}

type Kept = RuntimeProvider | { refusedOf: string } | null;

const kept = new Map<string, { provider: Kept; until: number }>();

function keep(name: string, provider: Kept, now: number): void {
  kept.delete(name);
  if (kept.size >= MAX_KEPT) kept.delete(kept.keys().next().value as string);
  kept.set(name, { provider, until: now + PROVIDER_CACHE_SECONDS * 1000 });
}

/** Forgets what this isolate read of the provider: called by the admin API's every change to it. */
export function forgetProvider(name: string): void {
  kept.delete(name);
}

function runtimeOf(row: ActingProvider): Kept {
  try {
    return { upstream: storedUpstream(row.config, row.organizationId), sealedAuthorization: row.authorization };
  } catch (error) {
    // The stored entry holds no secret (the Authorization is a column of its own), the rule names no value.
    const message = redact(error instanceof Error ? error.message : String(error));
    logLine("error", "provider_refused", { organization: row.organizationId, provider: row.name, message });
    return { refusedOf: row.organizationId };
  }
}

/**
 * The providers of these names (none of SSF_UPSTREAMS'): those kept, and the others read in one
 * statement on `db` (`read` is called first, when it is). A name with none is kept as none; one
 * whose stored entry is refused, as refused (its line written once a read).
 */
export async function runtimeProviders(
  db: Database,
  names: readonly string[],
  read: () => void = () => {},
): Promise<RuntimeProviders> {
  const now = Date.now();
  const found: RuntimeProviders = { acting: new Map(), refused: new Map() };
  const add = (name: string, provider: Kept) => {
    if (provider === null) return;
    if ("refusedOf" in provider) found.refused.set(name, provider.refusedOf);
    else found.acting.set(name, provider);
  };
  const unknown: string[] = [];
  for (const name of new Set(names.filter(isUpstreamName))) {
    const hit = kept.get(name);
    if (hit === undefined || hit.until <= now) unknown.push(name);
    else add(name, hit.provider);
  }
  if (unknown.length === 0) return found;
  read();
  const rows = await actingProviders(db, unknown);
  for (const name of unknown) {
    const row = rows.find((candidate) => candidate.name === name);
    const provider = row ? runtimeOf(row) : null;
    keep(name, provider, now);
    add(name, provider);
  }
  return found;
}
