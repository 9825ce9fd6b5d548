import { createMiddleware } from "hono/factory";
import { ApiError } from "../errors.ts";

// Far above anything a real client sends (a token is 66 characters, an id 22), and
// checked before any parsing or query, so oversized input costs nothing.
export const MAX_URL_LENGTH = 2048;
export const MAX_CREDENTIAL_HEADER_LENGTH = 16 * 1024;

export const inputBounds = createMiddleware(async (c, next) => {
  if (c.req.url.length > MAX_URL_LENGTH) throw new ApiError(414, "uri_too_long");
  for (const name of ["Authorization", "Cookie"]) {
    if ((c.req.header(name)?.length ?? 0) > MAX_CREDENTIAL_HEADER_LENGTH) {
      throw new ApiError(431, "header_too_large");
    }
  }
  await next();
});
