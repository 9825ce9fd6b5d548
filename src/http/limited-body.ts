import type { Context } from "hono";

// A request body's media type, for every entry point that reads one, and the body of an entry point that takes
// a signed token: read no further than a size limit, so that a huge body costs no more than the chunk
// that passes it.

/** The request's media type, lowercased, without parameters; "" when it has none. */
export function mediaTypeOf(c: Context): string {
  return (c.req.header("Content-Type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/** The body as text, or null when it is longer than `max` bytes: read no further than the chunk past it. */
export async function limitedText(request: Request, max: number): Promise<string | null> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of request.body ?? []) {
    length += chunk.byteLength;
    if (length > max) return null;
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}
