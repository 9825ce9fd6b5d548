import { and, eq, isNull, ne, or, sql } from "drizzle-orm";
import type { Instant } from "../domain/clock.ts";
import type { Refusal } from "../domain/refusal.ts";
import { authenticated, tail } from "./authenticated.ts";
import { moveOf, notMoving, onBucket } from "./buckets.ts";
import { batchNamed } from "./client.ts";
import type { ContextCheck } from "./client-context.ts";
import { isTokenOf, type TokenProof } from "./liveness.ts";
import { sessions } from "./schema.ts";
import type { BucketShard } from "./shards.ts";
import { type Logged, newWrite, recordEvents, type Writer } from "./writes.ts";

/** What a verified registration proof lets the batch write: the key, and the challenge replacing the one it signed. */
export interface Binding {
  /** The challenge the proof signed (its `jti`). */
  challenge: string;
  thumbprint: string;
  /** The challenge the next proof must sign. */
  nextChallenge: string;
}

/** What a refresh writes: a new bound cookie too, if its proof (`challenge`, null: none valid) holds. */
export interface Renewal extends Omit<Binding, "challenge"> {
  challenge: string | null;
  boundHash: string;
  boundExpiresAt: Date;
}

export type RegistrationOutcome =
  | "bound"
  | Extract<Refusal, "already_bound" | "wrong_challenge" | "not_live" | "step-up" | "support">;

/**
 * Binds the token's live session to the key of a verified proof over the challenge it was
 * issued, in one batch. The bound cookie the login set stays valid: requests sent while the
 * browser registered carry it. The `device_bound` event is logged while
 * the session is still unbound, then the row changes (so a replay logs nothing twice and still
 * answers "bound", from the event). The challenge is consumed: it never binds twice.
 */
export async function registerBinding(
  shard: BucketShard,
  proof: TokenProof,
  binding: Binding,
  writer: Writer,
  at: Instant,
  check: ContextCheck | null,
): Promise<Logged<RegistrationOutcome>> {
  const write = newWrite(at.now);
  return onBucket(shard, async (db) => {
    // Judged first, as every use of the token: a copied cookie must not bind the copier's key.
    const eligible = and(
      isTokenOf(proof, at),
      isNull(sessions.dbscKeyThumbprint),
      eq(sessions.held, false),
      eq(sessions.dbscChallenge, binding.challenge),
      // Support access binds no key: the agent's browser would then hold the user's session.
      isNull(sessions.supportAgent),
    );
    const head = authenticated(db, { proof, at, check, writer, write }, false);
    const { row, logged, move } = await batchNamed(db, {
      ...head.builders(),
      recorded: recordEvents(db, "device_bound", eligible, writer, write),
      bound: db
        .update(sessions)
        .set({ dbscKeyThumbprint: binding.thumbprint, dbscChallenge: binding.nextChallenge })
        .where(and(eligible, notMoving())),
      row: db
        .select({
          thumbprint: sessions.dbscKeyThumbprint,
          held: sessions.held,
          support: sessions.supportAgent,
          unrecorded: head.unrecorded().mapWith(Boolean).as("context_unrecorded"),
        })
        .from(sessions)
        .where(isTokenOf(proof, at)),
      ...tail(db, write, shard.bucket),
    });
    const answer = registrationOutcome(logged, row[0]);
    return {
      answer: { answer, events: logged, db },
      move: move[0],
      blocked: answer === "wrong_challenge" || row[0]?.unrecorded === true,
    };
  });
}

/** Bound only if this batch logged it; else why not, the held session told apart from a wrong challenge. */
function registrationOutcome(
  events: { type: string }[],
  row: { thumbprint: string | null; held: boolean; support: string | null } | undefined,
): RegistrationOutcome {
  if (events.some(({ type }) => type === "device_bound")) return "bound";
  if (!row) return "not_live";
  if (row.support !== null) return "support";
  if (row.thumbprint) return "already_bound";
  return row.held ? "step-up" : "wrong_challenge";
}

export type RefreshOutcome = "refreshed" | "challenged" | "not_bound" | "not_live";

/**
 * Renews a device-bound session's bound cookie when the proof signed the session's current
 * challenge with its key; otherwise only replaces the challenge (for the 403 that asks for
 * a proof). Either way the challenge changes, so none is accepted twice. One batch; it is not
 * activity, so `last_active_at` and the expiry stay as they are.
 */
export async function refreshBinding(
  shard: BucketShard,
  proof: TokenProof,
  binding: Renewal,
  at: Instant,
): Promise<RefreshOutcome> {
  return onBucket(shard, async (db) => {
    const bound = and(isTokenOf(proof, at), eq(sessions.dbscKeyThumbprint, binding.thumbprint));
    const renew = db
      .update(sessions)
      .set({
        dbscChallenge: binding.nextChallenge,
        boundCookieHash: binding.boundHash,
        boundCookieExpiresAt: binding.boundExpiresAt,
        // SET reads the row as it was: the replaced cookie stays good until its own expiry.
        previousBoundCookieHash: sql`${sessions.boundCookieHash}`,
        previousBoundCookieExpiresAt: sql`${sessions.boundCookieExpiresAt}`,
      })
      .where(and(bound, eq(sessions.dbscChallenge, binding.challenge ?? ""), notMoving()));
    // Skipped when the renewal above already set it: one row written per refresh.
    const rechallenge = db
      .update(sessions)
      .set({ dbscChallenge: binding.nextChallenge })
      .where(
        and(bound, or(isNull(sessions.dbscChallenge), ne(sessions.dbscChallenge, binding.nextChallenge)), notMoving()),
      );
    const { rows, move } = await batchNamed(db, {
      renew,
      rechallenge,
      rows: db
        .select({ thumbprint: sessions.dbscKeyThumbprint, boundHash: sessions.boundCookieHash })
        .from(sessions)
        .where(isTokenOf(proof, at)),
      move: moveOf(db, shard.bucket),
    });
    const row = rows[0];
    const answer: RefreshOutcome = !row
      ? "not_live"
      : row.thumbprint !== binding.thumbprint
        ? "not_bound"
        : row.boundHash === binding.boundHash
          ? "refreshed"
          : "challenged";
    return { answer, move: move[0], blocked: answer === "challenged" };
  });
}
