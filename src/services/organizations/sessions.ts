import {
  actOnOrganizationSessions,
  listOrganizationSessionsOn,
  ORGANIZATION_CHUNK,
} from "../../db/organizations/sessions.ts";
import { InvalidInput } from "../../domain/invalid-input.ts";
import { checkOrganizationId } from "../../domain/organizations/organization.ts";
import type { Sent } from "../../domain/sent.ts";
import { type BackendSessionView, type JsonText, parsedText } from "../../domain/session-view.ts";
import { SESSION_ID_PATTERN } from "../../domain/token.ts";
import { type Scope, write } from "../scope.ts";
import { checkReason, type Reason } from "../user-sessions.ts";

// An organization's sessions all at once (a customer offboarded, an incident): ended, held
// until each user signs in again, or listed, on every database in parallel, one round trip to
// each per call. A call is bounded: it changes at most ORGANIZATION_CHUNK sessions on each
// database and answers whether any remain (`complete: false`: call again), so it takes the
// time of one small batch whatever the organization's size (docs/organization-sessions.md).

export { ORGANIZATION_CHUNK };

export interface OrganizationSessionsInput {
  organizationId: string;
  reason: Reason;
}

/** What ending or holding answers: how many this call changed, how many wait for a bucket move, and whether it is done. */
export interface OrganizationActAnswer {
  /** Sessions that sit in a bucket being moved, untouched: call again after the move. */
  moving: number;
  /** No session of the organization is left to end (or to hold): no call needs to follow. */
  complete: boolean;
}
export type EndedAnswer = OrganizationActAnswer & { ended: number };
export type HeldAnswer = OrganizationActAnswer & { held: number };

/**
 * Acts on the organization's sessions on every database, each logged (`ended` or `held`)
 * with the reason and the scope's admin key, its events handed to the outbox as any ending's:
 * CAEP session-revoked or risk-level-change to the streams, and to the provider each session
 * signed in through when it takes that event. Null: no such organization (nothing changed).
 */
async function actOnOrganization(
  scope: Scope,
  input: Sent<OrganizationSessionsInput>,
  act: "end" | "hold",
): Promise<{ changed: number; moving: number; complete: boolean } | null> {
  const organizationId = checkOrganizationId(input?.organizationId, "organizationId");
  const reason = checkReason(input.reason);
  const answers = await Promise.all(
    scope.shards
      .all()
      .map((shard) =>
        write(scope, null, (writer) => actOnOrganizationSessions(shard, organizationId, act, reason, writer, scope.at)),
      ),
  );
  if (!answers.some((answer) => answer.known)) return null;
  return {
    changed: answers.reduce((sum, answer) => sum + answer.changed, 0),
    moving: answers.reduce((sum, answer) => sum + answer.moving, 0),
    // A database that filled its chunk may have more: the next call finds none or goes on.
    complete: answers.every((answer) => answer.changed < ORGANIZATION_CHUNK && answer.moving === 0),
  };
}

/** Ends the organization's live sessions, at most ORGANIZATION_CHUNK per database a call; null: no such organization. */
export async function endOrganizationSessions(
  scope: Scope,
  input: Sent<OrganizationSessionsInput>,
): Promise<EndedAnswer | null> {
  const acted = await actOnOrganization(scope, input, "end");
  return acted && { ended: acted.changed, moving: acted.moving, complete: acted.complete };
}

/**
 * Holds the organization's live sessions until each user signs in again (`reauthenticate`), as a
 * context change's hold does, at most ORGANIZATION_CHUNK per database a call; a session held
 * already is left as it is. Null: no such organization.
 */
export async function holdOrganizationSessions(
  scope: Scope,
  input: Sent<OrganizationSessionsInput>,
): Promise<HeldAnswer | null> {
  const acted = await actOnOrganization(scope, input, "hold");
  return acted && { held: acted.changed, moving: acted.moving, complete: acted.complete };
}

/** A page is at most this long, so a call reads at most this many rows (plus one) on each database. */
export const MAX_ORGANIZATION_PAGE = 100;
export const DEFAULT_ORGANIZATION_PAGE = 50;

/** A session as the admin list shows it (`BackendSessionView`), with its user, and `held` only when it is. */
export type OrganizationSessionView = BackendSessionView & { user_id: string; held?: true };

export interface OrganizationSessionsPage {
  /** By session id, each as the admin list shows a session, with its `user_id`, and `held: true` when held. */
  sessions: OrganizationSessionView[];
  /** Where the next page starts; null on the last. */
  nextCursor: string | null;
}

/** The cursor after `id`: opaque to the caller, the last listed id inside. */
function cursorAfter(id: string): string {
  return btoa(id).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function checkCursor(cursor: unknown): string | null {
  if (cursor == null) return null;
  let id: string | null = null;
  try {
    id = typeof cursor === "string" ? atob(cursor.replaceAll("-", "+").replaceAll("_", "/")) : null;
  } catch {
    // Not base64url: no cursor this list gave.
  }
  if (id === null || !SESSION_ID_PATTERN.test(id))
    throw new InvalidInput("cursor must be a nextCursor this list answered");
  return id;
}

function checkLimit(limit: unknown): number {
  if (limit == null) return DEFAULT_ORGANIZATION_PAGE;
  const rule = `limit must be a whole number from 1 to ${MAX_ORGANIZATION_PAGE}`;
  if (typeof limit !== "number") throw new InvalidInput(rule);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_ORGANIZATION_PAGE) throw new InvalidInput(rule, RangeError);
  return limit;
}

export interface ListOrganizationSessionsInput {
  organizationId: string;
  /** At most MAX_ORGANIZATION_PAGE; omitted: DEFAULT_ORGANIZATION_PAGE. */
  limit?: number | null;
  /** The previous page's `nextCursor`; omitted: the first page. */
  cursor?: string | null;
}

/**
 * One page of the organization's live sessions across every database, by session id (a stable
 * order: a session never changes its id, a new one lands where its id sorts): each database
 * answers its first `limit` + 1 after the cursor, in one round trip, and the page is the first
 * `limit` of them all. Null: no such organization.
 */
export async function listOrganizationSessions(
  scope: Scope,
  input: Sent<ListOrganizationSessionsInput>,
): Promise<OrganizationSessionsPage | null> {
  const organizationId = checkOrganizationId(input?.organizationId, "organizationId");
  const limit = checkLimit(input.limit);
  const after = checkCursor(input.cursor);
  const pages = await Promise.all(
    scope.shards.all().map((shard) => listOrganizationSessionsOn(shard, organizationId, after, limit + 1, scope.at)),
  );
  if (!pages.some((page) => page.known)) return null;
  const listed = pages.flatMap((page) => page.sessions).sort((a, b) => (a.id < b.id ? -1 : 1));
  const page = listed.slice(0, limit);
  const last = page.at(-1);
  return {
    // An object for the RPC to hand over and the admin API to answer: the one parse.
    sessions: parsedText(`[${page.map((session) => session.view).join(",")}]` as JsonText<OrganizationSessionView[]>),
    nextCursor: listed.length > limit && last ? cursorAfter(last.id) : null,
  };
}
