import { WorkerEntrypoint } from "cloudflare:workers";
import { instant } from "./clock.ts";
import { readConfig } from "./config.ts";
import { authenticate, openDatabase } from "./db/queries.ts";
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
  async create(input: CreateSessionInput): Promise<CreatedSession> {
    return issueSession(openDatabase(this.env.DB), readConfig(this.env), input);
  }

  /** Also records the session's activity, like any authenticated request. */
  async authenticate(token: string): Promise<AuthenticatedSession | null> {
    const proof = typeof token === "string" ? await proveToken(token) : null;
    if (!proof) return null;
    const caller = await authenticate(openDatabase(this.env.DB), proof, instant(readConfig(this.env)));
    return caller && { sessionId: caller.id, userId: caller.userId, expiresAt: caller.expiresAt.toISOString() };
  }
}
