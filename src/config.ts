// Every var the worker reads, parsed once per request from the bindings.

export interface Config {
  cookieName: string;
  ttlSeconds: number;
  allowedOrigins: ReadonlySet<string>;
}

export type ConfigVars = Pick<Env, "SESSION_COOKIE_NAME" | "SESSION_TTL_SECONDS" | "ALLOWED_ORIGINS">;

const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** `https://app.example/` and `https://app.example` name the same origin; a browser sends the latter. */
function toOrigin(value: string): string {
  const url = new URL(value);
  if (url.origin === "null") throw new Error(`ALLOWED_ORIGINS: ${value} is not an http(s) origin`);
  return url.origin;
}

export function readConfig(vars: ConfigVars): Config {
  const cookieName = vars.SESSION_COOKIE_NAME || "__Host-session";
  if (!COOKIE_NAME.test(cookieName)) throw new Error("SESSION_COOKIE_NAME is not a valid cookie name");
  const ttlSeconds = Number(vars.SESSION_TTL_SECONDS || 2_592_000);
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds <= 0) {
    throw new Error("SESSION_TTL_SECONDS must be a positive integer");
  }
  const allowedOrigins = new Set(
    (vars.ALLOWED_ORIGINS ?? "")
      .split(",")
      .map((origin) => origin.trim())
      .filter(Boolean)
      .map(toOrigin),
  );
  return { cookieName, ttlSeconds, allowedOrigins };
}
