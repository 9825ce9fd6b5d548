import { HonoBase, type HonoOptions } from "hono/hono-base";
import { TrieRouter } from "hono/router/trie-router";
import type { BlankEnv, BlankSchema, Env, Schema } from "hono/types";

/**
 * Hono with its TrieRouter alone, built like Hono's own presets (`hono/quick`, `hono/tiny`).
 * The default preset bundles three routers and picks RegExpRouter when it can, falling back
 * to TrieRouter; both match alike (`hono/tiny`'s PatternRouter does not: it takes a trailing
 * slash), and with a dozen routes the choice costs nothing at run time, only bundle size
 * (BENCHMARKS.md, Reading).
 */
export class Hono<
  E extends Env = BlankEnv,
  S extends Schema = BlankSchema,
  BasePath extends string = "/",
> extends HonoBase<E, S, BasePath> {
  constructor(options: HonoOptions<E> = {}) {
    super({ ...options, router: new TrieRouter() });
  }
}
