import { WorkerEntrypoint } from "cloudflare:workers";
import { instant } from "./clock.ts";
import { readConfig } from "./config.ts";
import { authenticate } from "./db/queries.ts";
import { openShards } from "./db/shards.ts";
import { type CreatedSession, type CreateSessionInput, issueSession } from "./issue-session.ts";
import { proveToken } from "./token.ts";

export interface AuthenticatedSession {
  sessionId: string;
  userId: string;
  expiresAt: string;
}

/**
 * Issuing and checking sessions for the rest of the system (the login worker, other
 * APIs) over a service binding; deliberately not reachable over HTTP.
 */
export class SessionService extends WorkerEntrypoint<Env> {
  create(input: CreateSessionInput): Promise<CreatedSession> {
    return issueSession(openShards(this.env), readConfig(this.env), input);
  }

  /** Also records the session's activity, like any authenticated request. */
  async authenticate(token: string): Promise<AuthenticatedSession | null> {
    const proof = typeof token === "string" ? await proveToken(token) : null;
    const shard = proof && openShards(this.env).forSession(proof.id);
    if (!proof || !shard) return null;
    const caller = await authenticate(shard.db, proof, instant(readConfig(this.env)));
    return caller && { sessionId: caller.id, userId: caller.userId, expiresAt: caller.expiresAt.toISOString() };
  }
}
