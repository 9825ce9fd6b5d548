// Statements in each operation's one batch, as test/statements.test.ts measures them and
// ARCHITECTURE.md's table gives them (`npm run docs:check` compares the two): a browser's
// session used through its cookie with an unchanged context under the default policies, and the
// same operation as a Bearer call (never judged) or without a context.

/** The row of ARCHITECTURE.md's table, per operation: [judged, not judged]. */
export const STATEMENTS = {
  "GET /auth/sessions": [3, 2],
  "GET /auth/events": [4, 3],
  "DELETE /auth/sessions/:id": [6, 5],
  "DELETE /auth/logout": [6, 5],
  "DELETE /auth/logout?scope=others": [6, 5],
  "POST /auth/logout": [4, 4],
  "POST /ssf/inbound": [9, 9],
  "POST /upstreams/:name/backchannel-logout": [10, 10],
  "POST /upstreams/:name/global-token-revocation": [10, 10],
  "SessionService.authenticate": [3, 2],
  "GET /auth/whoami": [3, 2],
  "POST /auth/token": [3, 2],
  "SessionService.reauthenticate": [6, 5],
  "SessionService.create": [7, 7],
  "SessionService.create, upstream sign-in": [10, 10],
  "SessionService.openSupportSession": [6, 6],
  "SessionService.updateSessionData": [2, 2],
  "GET /auth/report": [3, 3],
  "POST /auth/report": [6, 6],
} as const satisfies Record<string, readonly [number, number]>;

export type Operation = keyof typeof STATEMENTS;
