import type { Context, TypedResponse } from "hono";
import type { JSONParsed } from "hono/utils/types";
import type { JsonText } from "../domain/session-view.ts";

/**
 * `c.json(object)` for an object whose members are JSON text already (SQLite's): the same
 * bytes, Content-Type and type for the typed client, written around the text without parsing
 * it and serializing it again. Members keep the order given, as `JSON.stringify` keeps the object's.
 */
export function jsonOfText<T extends Record<string, unknown>>(
  c: Context,
  members: { [K in keyof T]: JsonText<T[K]> },
): Response & TypedResponse<JSONParsed<T>, 200, "json"> {
  const body = Object.entries(members)
    .map(([member, text]) => `${JSON.stringify(member)}:${text}`)
    .join(",");
  // The body is the JSON of a T by construction; Hono's types cannot see through the text.
  return c.body(`{${body}}`, 200, { "Content-Type": "application/json" }) as unknown as Response &
    TypedResponse<JSONParsed<T>, 200, "json">;
}

/** `value` as JSON text, for a member beside SQLite's. */
export function jsonText<T>(value: T): JsonText<T> {
  return JSON.stringify(value) as JsonText<T>;
}
