import { createMiddleware } from "hono/factory";
import { uriTooLong } from "../refusals.ts";

// A real path is at most `/auth/sessions/` and a 26-character id. The limit sits far above
// that, so that for any id a client could plausibly send, authentication still comes
// first (the contract's 401, not 414); only a path this long, which can only be hostile,
// is refused before any parsing or query. The query string is not limited here: no route
// reads it (but `scope`), and the contract answers requests with one. Oversized
// credentials need no limit of their own: a token longer than 71 characters is
// malformed, refused by the contract's own rows without a lookup.
export const MAX_PATH_LENGTH = 8192;

export const inputLimits = createMiddleware(async (c, next) => {
  if (c.req.path.length > MAX_PATH_LENGTH) throw uriTooLong();
  await next();
});
