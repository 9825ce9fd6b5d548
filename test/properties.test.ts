import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { COOKIE_NAME, call, d1OfUser, issue, newUser, ORIGIN, tableSnapshot } from "./helpers.ts";

// Property-based tests through the public HTTP interface against real D1: whatever the
// method, path, Authorization, Cookie or session id, the service never answers 5xx,
// every 4xx is the contract's error shape, and the tables only change when the request
// carried a live token of the user whose rows changed.

const RUNS = Number(env.FAST_CHECK_RUNS);
const TIMEOUT_MS = 30_000 + RUNS * 100;

// Characters `Headers` accepts in a value (no CR, LF or NUL), Latin-1 included but rarer:
// workerd prints a warning for each non-ASCII header value it encodes.
const headerChar = fc.oneof(
  { weight: 30, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)) },
  { weight: 1, arbitrary: fc.constantFrom("\t", "é", "ÿ", "\u0080", "\u00a0") },
);
const headerText = (maxLength: number) => fc.string({ unit: headerChar, maxLength });

const segment = fc.oneof(
  fc.constantFrom(
    "",
    "AAAAAAAAAAAAAAAAAAAAAAAA",
    "%2F",
    "..",
    "%2E%2E",
    "%00",
    "'",
    '"',
    "%27%20OR%201%3D1",
    "%E0%A4%A",
    " ",
  ),
  fc.string({ unit: headerChar, maxLength: 40 }).map(encodeURIComponent),
  fc.constant("A".repeat(10 * 1024)),
  fc.constant(encodeURIComponent("セッション")),
);

const path = fc.oneof(
  fc.constantFrom("/auth/sessions", "/auth/sessions/", "/auth/logout", "/auth/events", "/", "/auth", "/openapi.json"),
  segment.map((id) => `/auth/sessions/${id}`),
  fc
    .tuple(
      fc.constantFrom("/auth/logout", "/auth/sessions"),
      fc.constantFrom("?scope=others", "?scope=all", "?scope=", "?token=x"),
    )
    .map(([p, q]) => p + q),
  fc.array(segment, { maxLength: 4 }).map((parts) => `/${parts.join("/")}`),
);

const method = fc.constantFrom("GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "PURGE");

// Requests are either anything at all, or one of the real operations aimed at a session
// of the world (resolved at run time), so the paths that do change rows are exercised.
const OPERATIONS: Record<string, (id: string) => readonly [string, string]> = {
  list: () => ["GET", "/auth/sessions"],
  events: () => ["GET", "/auth/events"],
  deleteOne: (id) => ["DELETE", `/auth/sessions/${id}`],
  logout: () => ["POST", "/auth/logout"],
  logoutAll: () => ["DELETE", "/auth/logout"],
  logoutOthers: () => ["DELETE", "/auth/logout?scope=others"],
};
const target = fc.oneof(
  { weight: 1, arbitrary: fc.tuple(method, path).map(([m, p]) => ({ method: m, path: p })) },
  { weight: 2, arbitrary: fc.record({ operation: fc.constantFrom(...Object.keys(OPERATIONS)), index: fc.nat() }) },
);

interface Issued {
  token: string;
  id: string;
  userId: string;
}

/**
 * Two users' sessions. Requests end some of them, so each run first tops every user back
 * up to two live sessions; credentials are drawn as (which session, which distortion)
 * and resolved against the pool at run time.
 */
class World {
  readonly users = [newUser(), newUser()];
  readonly issued: Issued[] = [];

  async replenish(): Promise<void> {
    for (const userId of this.users) {
      const { results } = await (await d1OfUser(userId))
        .prepare("SELECT COUNT(*) AS n FROM sessions WHERE user_id = ?")
        .bind(userId)
        .all<{ n: number }>();
      for (let n = results[0]?.n ?? 0; n < 2; n++) this.issued.push({ ...(await issue(userId)), userId });
    }
  }

  pick(index: number): Issued {
    return this.issued[index % this.issued.length]!;
  }
}

const DISTORTIONS: Record<string, (t: Issued) => string> = {
  whole: (t) => t.token,
  "wrong secret": (t) => `${t.id}.${"A".repeat(43)}`,
  lowercased: (t) => t.token.toLowerCase(),
  "id only": (t) => t.id,
  "trailing space": (t) => `${t.token} `,
};

const tokenLike = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      index: fc.nat(),
      distortion: fc.oneof(
        { weight: 4, arbitrary: fc.constant("whole") },
        fc.constantFrom(...Object.keys(DISTORTIONS)),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.oneof(headerText(80), fc.constant("A".repeat(8 * 1024))) },
);
type TokenLike = string | { index: number; distortion: string };

function resolve(world: World, like: TokenLike): string {
  return typeof like === "string" ? like : DISTORTIONS[like.distortion]!(world.pick(like.index));
}

const credential = fc.record({
  authorization: fc.option(
    fc.oneof(
      {
        weight: 3,
        arbitrary: fc.record({
          scheme: fc.constantFrom("Bearer", "Bearer", "bEaReR", "Basic", "Bearer  "),
          token: tokenLike,
        }),
      },
      { weight: 1, arbitrary: headerText(100) },
    ),
    { nil: undefined },
  ),
  cookie: fc.option(
    fc.oneof(
      fc.record({ prefix: fc.constantFrom("", "other=1; ", `${COOKIE_NAME}=x; `), token: tokenLike }),
      headerText(100),
    ),
    { nil: undefined },
  ),
  origin: fc.option(fc.constantFrom(ORIGIN, "https://evil.example", "null"), { nil: undefined }),
  fetchSite: fc.option(fc.constantFrom("same-origin", "same-site", "cross-site", "none"), { nil: undefined }),
});

async function snapshot(): Promise<{ sessions: string; events: string }> {
  const pick = (rows: unknown[], columns: string[]) =>
    (rows as Record<string, unknown>[]).map((row) => Object.fromEntries(columns.map((c) => [c, row[c]])));
  return {
    sessions: JSON.stringify(pick(await tableSnapshot("sessions"), ["id", "user_id", "last_active_at"])),
    events: JSON.stringify(pick(await tableSnapshot("session_events"), ["id", "user_id"])),
  };
}

async function usersChanged(before: { sessions: string; events: string }): Promise<Set<string>> {
  const after = await snapshot();
  const rows = (json: string) => JSON.parse(json) as { id: string | number; user_id: string }[];
  const key = (row: { id: string | number; user_id: string }) => `${row.id}|${row.user_id}`;
  const changed = new Set<string>();
  for (const table of ["sessions", "events"] as const) {
    const was = new Set(rows(before[table]).map(key));
    const now = new Set(rows(after[table]).map(key));
    for (const row of rows(before[table])) if (!now.has(key(row))) changed.add(row.user_id);
    for (const row of rows(after[table])) if (!was.has(key(row))) changed.add(row.user_id);
  }
  return changed;
}

describe("properties of any request", () => {
  it("never 5xx; every error is the contract's shape; only a live token's user's rows change", {
    timeout: TIMEOUT_MS,
  }, async () => {
    const world = new World();
    let changes = 0;
    await fc.assert(
      fc.asyncProperty(target, credential, async (aim, cred) => {
        await world.replenish();
        const [m, p]: readonly [string, string] =
          "method" in aim ? [aim.method, aim.path] : OPERATIONS[aim.operation]!(world.pick(aim.index).id);
        const headers: Record<string, string> = {};
        const { authorization, cookie } = cred;
        if (authorization !== undefined) {
          headers.Authorization =
            typeof authorization === "string"
              ? authorization
              : `${authorization.scheme} ${resolve(world, authorization.token)}`;
        }
        if (cookie !== undefined) {
          headers.Cookie =
            typeof cookie === "string" ? cookie : `${cookie.prefix}${COOKIE_NAME}=${resolve(world, cookie.token)}`;
        }
        if (cred.origin !== undefined) headers.Origin = cred.origin;
        if (cred.fetchSite !== undefined) headers["Sec-Fetch-Site"] = cred.fetchSite;
        const liveBefore = new Map<string, string>();
        for (const t of world.issued) {
          const { results } = await (await d1OfUser(t.userId))
            .prepare("SELECT 1 FROM sessions WHERE id = ?")
            .bind(t.id)
            .all();
          if (results.length > 0) liveBefore.set(t.token, t.userId);
        }
        const before = await snapshot();

        const response = await call(m, p, headers);

        expect(response.status).toBeLessThan(500);
        if (response.status >= 400 && m !== "HEAD") {
          expect(response.headers.get("Content-Type")).toBe("application/json");
          const body = (await response.json()) as Record<string, unknown>;
          expect(Object.keys(body).sort()).toEqual(["code", "message"]);
          expect(typeof body.code).toBe("string");
          expect(typeof body.message).toBe("string");
        }
        const changed = await usersChanged(before);
        if (changed.size > 0) changes++;
        // A 200 on an unsafe method is the only way anything ends.
        if (response.status === 200 && (m === "POST" || m === "DELETE")) expect(changed.size).toBeGreaterThan(0);
        if (changed.size > 0) {
          // The only credentials that may change anything: a live token, sent whole.
          const presented = [
            headers.Authorization?.replace(/^bearer +/i, "").trim(),
            headers.Cookie?.split(`${COOKIE_NAME}=`).at(-1)?.trim(),
          ];
          const owners = new Set(
            presented.filter((t) => t !== undefined && liveBefore.has(t)).map((t) => liveBefore.get(t!)),
          );
          expect(response.status).toBe(200);
          for (const user of changed) expect(owners.has(user)).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
    // Guards against a vacuous pass: some generated requests must have been live logouts.
    expect(changes).toBeGreaterThan(0);
  });

  it("a session id in the path, whatever it is, never deletes anything", { timeout: TIMEOUT_MS }, async () => {
    const userId = newUser();
    const caller = await issue(userId);
    const victim = await issue(newUser());
    await fc.assert(
      fc.asyncProperty(segment, async (id) => {
        const before = await snapshot();
        const response = await call("DELETE", `/auth/sessions/${id}`, { Authorization: `Bearer ${caller.token}` });
        // 404: the URL parser resolves dot segments, so `..` leaves the route entirely.
        expect([400, 401, 404, 414]).toContain(response.status);
        expect(await snapshot()).toEqual(before);
      }),
      { numRuns: RUNS },
    );
    expect((await call("GET", "/auth/sessions", { Authorization: `Bearer ${victim.token}` })).status).toBe(200);
  });
});
