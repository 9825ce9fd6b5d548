import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { ByToken } from "../src/db/authenticated.ts";
import { type Database, openDatabase } from "../src/db/client.ts";
import type { ContextCheck } from "../src/db/client-context.ts";
import { compiled, compiledRun, placeholders, shaped } from "../src/db/compiled.ts";
import { registerBinding } from "../src/db/device-binding.ts";
import { listEvents } from "../src/db/events.ts";
import { reauthenticateSession } from "../src/db/issuing.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  listSessionsByToken,
  listSessionsByUserId,
} from "../src/db/sessions.ts";
import type { BucketShard } from "../src/db/shards.ts";
import type { ClientContext, ContextPolicies, TravelLimits } from "../src/domain/client-context.ts";
import { difference, shapesSent, stale } from "./fresh-renders.ts";
import { d1, shardBindings } from "./helpers.ts";

// The statements by token and the lists' are compiled: rendered once per shape of their input and
// each call's values filled in (src/db/compiled.ts). test/setup.ts compares every one the suite
// sends with a fresh render of its call; here every operation by token runs from one input, then
// with each field of it changed alone, on the renders the runs before it made: first to each
// other value of what changes the SQL text (a builder that took it for a placeholder's would send
// what its values do not, which the comparison finds), then to other values it only binds (a
// value that is no placeholder would add a render per call).

const binding = shardBindings()[0] as string;
const db = openDatabase(d1(binding));

/** What an operation by token is called with; its write (`newWrite`) is new on each call. */
type Input = Omit<ByToken, "write"> & { bucket: string };

/**
 * Other values for each field of `T`: those that change the SQL text (`text`), and those it
 * only binds (`value`). A field added to `T` is a type error here until it is varied.
 */
type Others<T> = { [K in keyof Required<T>]: { text: T[K][]; value?: T[K][] } | { text?: T[K][]; value: T[K][] } };

const NOW = new Date("2026-11-02T10:00:00.000Z");
const BEFORE = (ms: number) => new Date(NOW.getTime() - ms);
const ID = `AA${"a".repeat(22)}`;
// Every policy acts: each statement of the head is there.
const CHECK: ContextCheck = {
  context: { browser: "Chrome", os: "macOS", country: "DE", asn: 3320, latitude: 50.1109, longitude: 8.6821 },
  policies: { device: "hold", network: "end", travel: "log" },
  travel: { maxKmh: 1000, minKm: 2000 },
  logOnly: false,
};
// Every field that may be absent is present: each is varied to absent, and to another value.
const BASE: Input = {
  proof: { id: ID, secretHash: "0".repeat(64), boundHash: "2".repeat(64), carrier: "cookie", member: false },
  at: {
    now: NOW,
    idleCutoff: BEFORE(1_209_600_000),
    slidingMaxLifetimeMs: 34_560_000_000,
    stepUpCutoff: BEFORE(300_000),
    slides: false,
    maxLifetimeMs: 34_560_000_000,
  },
  check: CHECK,
  writer: { sessionId: ID, ipAddress: "192.0.2.1", queued: false, published: false, adminKeyId: null },
  bucket: "AA",
};
const OTHERS: {
  proof: Others<Input["proof"]>;
  at: Others<Input["at"]>;
  context: Others<ClientContext>;
  policies: Others<ContextPolicies>;
  travel: Others<TravelLimits>;
  writer: Others<Input["writer"]>;
  check: Others<Pick<Input, "check">>["check"];
  bucket: Others<Pick<Input, "bucket">>["bucket"];
} = {
  proof: {
    id: { value: [`AA${"b".repeat(22)}`] },
    secretHash: { value: ["1".repeat(64)] },
    boundHash: { text: [undefined, null, ""], value: ["3".repeat(64)] },
    carrier: { text: ["bearer", null] },
    member: { text: [true] },
  },
  at: {
    now: { value: [new Date(NOW.getTime() + 1)] },
    idleCutoff: { text: [null], value: [BEFORE(86_400_000)] },
    slidingMaxLifetimeMs: { text: [null], value: [2_592_000_000] },
    stepUpCutoff: { text: [null], value: [BEFORE(600_000)] },
    slides: { text: [true] },
    maxLifetimeMs: { value: [2_592_000_000] },
  },
  // Apple's two faces (facesOf) are varied as pairs, below: their browser and OS are text.
  context: {
    browser: { value: ["Firefox"] },
    os: { value: ["Windows"] },
    country: { text: [null], value: ["FR"] },
    asn: { text: [null], value: [64_496] },
    latitude: { text: [null], value: [22.3193] },
    longitude: { value: [114.1694] },
  },
  policies: {
    device: { text: ["ignore", "log", "end"] },
    network: { text: ["ignore", "log", "hold"] },
    travel: { text: ["ignore", "hold", "end"] },
  },
  travel: { maxKmh: { text: [500] }, minKm: { text: [0] } },
  writer: {
    sessionId: { value: [null, `AA${"c".repeat(22)}`] },
    ipAddress: { value: [null, "2001:db8::1"] },
    queued: { text: [true] },
    published: { text: [true] },
    adminKeyId: { value: ["AAAAAAAAAAAAAAAAAAAAAA"] },
  },
  check: { text: [null] },
  bucket: { value: ["AB"] },
};
/** Safari on macOS, then on iOS: a shape that only knew "Apple" would send the first's pair to the second. */
const APPLE_FACES = [
  { browser: "Safari", os: "macOS" },
  { browser: "Mobile Safari", os: "iOS" },
];

type Kind = "text" | "value";

/** `base` with one field of it changed, for each other value of `kind` of each field. */
function varied<T extends object>(base: T, others: Others<T>, kind: Kind): T[] {
  return (Object.keys(others) as (keyof T)[]).flatMap((key) =>
    ((others[key] as Partial<Record<Kind, T[keyof T][]>>)[kind] ?? []).map((value) => ({ ...base, [key]: value })),
  );
}

/** The base input with one field changed, to each of its other values of `kind`. */
function inputs(kind: Kind): Input[] {
  const withContext = (context: ClientContext) => ({ ...BASE, check: { ...CHECK, context } });
  return [
    ...varied(BASE.proof, OTHERS.proof, kind).map((proof) => ({ ...BASE, proof })),
    ...varied(BASE.at, OTHERS.at, kind).map((at) => ({ ...BASE, at })),
    ...varied(CHECK.context, OTHERS.context, kind).map(withContext),
    ...(kind === "text" ? APPLE_FACES.map((face) => withContext({ ...CHECK.context, ...face })) : []),
    ...varied(CHECK.policies, OTHERS.policies, kind).map((policies) => ({ ...BASE, check: { ...CHECK, policies } })),
    ...varied(CHECK.travel, OTHERS.travel, kind).map((travel) => ({ ...BASE, check: { ...CHECK, travel } })),
    // A re-authentication's: each action read as `log` unless `ignore`, in the text.
    ...(kind === "text" ? [{ ...BASE, check: { ...CHECK, logOnly: true } }] : []),
    ...varied(BASE.writer, OTHERS.writer, kind).map((writer) => ({ ...BASE, writer })),
    ...(OTHERS.check[kind] ?? []).map((check) => ({ ...BASE, check })),
    ...(OTHERS.bucket[kind] ?? []).map((bucket) => ({ ...BASE, bucket })),
  ];
}

const otherId = () => `AA${crypto.randomUUID().replaceAll("-", "").slice(0, 22)}`;

/** Every operation whose batch starts with the head (src/db/authenticated.ts). */
const OPERATIONS: Record<string, (shard: BucketShard, input: Input) => Promise<unknown>> = {
  authenticate: (shard, { proof, at, check, writer }) => authenticate(shard, proof, at, check, writer),
  list: (shard, { proof, at, check, writer }) => listSessionsByToken(shard, proof, at, check, writer),
  events: (shard, { proof, at, check, writer }) => listEvents(shard, proof, at, check, writer),
  "delete own": (shard, { proof, at, check, writer }) => deleteSession(shard, proof, proof.id, writer, at, check),
  "delete other": (shard, { proof, at, check, writer }) => deleteSession(shard, proof, otherId(), writer, at, check),
  "logout everywhere": (shard, { proof, at, check, writer }) => endAllSessionsByToken(shard, proof, writer, at, check),
  "logout others": (shard, { proof, at, check, writer }) => endOtherSessionsByToken(shard, proof, writer, at, check),
  reauthenticate: (shard, { proof, at, check, writer }) =>
    reauthenticateSession(
      shard,
      proof,
      { secretHash: "3".repeat(64), factors: { pwd: at.now.getTime() }, assuranceLevel: 1 },
      writer,
      at,
      check,
    ),
  "bind a device": (shard, { proof, at, check, writer }) =>
    registerBinding(
      shard,
      proof,
      { challenge: "challenge", thumbprint: "key", nextChallenge: "next" },
      writer,
      at,
      check,
    ),
};

/** Each builder sent so far, by its name, with how many shapes it was rendered for. */
const renders = () => [...shapesSent].map(([statement, shapes]) => [statement.build.name, shapes.size]);

describe("the statement cache", () => {
  // About 370 batches: longer than the default 5 s on a busy machine.
  it("sends what a fresh render of each call gives, for every operation by token, with each field of its input changed", {
    timeout: 60_000,
  }, async () => {
    const runAll = async (input: Input) => {
      const shard: BucketShard = { binding, db, bucket: input.bucket, elsewhere: () => null };
      for (const run of Object.values(OPERATIONS)) await run(shard, input);
    };
    for (const input of [BASE, ...inputs("text")]) await runAll(input);
    expect(stale.map(difference)).toEqual([]);
    const rendered = renders();
    for (const input of inputs("value")) await runAll(input);
    expect(stale.map(difference)).toEqual([]);
    // A value only bound is no part of the shape: it would render the statements anew for each call.
    expect(renders()).toEqual(rendered);
    // One statement for each: the head's three, the caller's row every operation reads, the
    // lists', and the endings' (delete own, delete other, logout everywhere, logout others).
    expect([...shapesSent.keys()].map((statement) => statement.build.name).sort()).toEqual([
      "activityUpdate",
      "callerRowOf",
      "contextEnded",
      "contextEvents",
      "ended",
      "eventList",
      "loggedOf",
      "recorded",
      "sessionList",
    ]);
    // An ending's name is in its statements' input, so in their shapes: each rendered for its own.
    const endings = [...shapesSent].flatMap(([statement, shapes]) =>
      statement.build.name === "ended" ? [...shapes].map((shape) => JSON.parse(shape).ending) : [],
    );
    expect([...new Set(endings)].sort()).toEqual(["deleteOther", "deleteOwn", "logoutAll", "logoutOthers"]);
  });

  it("tells a statement its values would not send from a fresh render: a builder that branches on a placeholder, or reads what its input does not carry", () => {
    const before = stale.length;
    const { values, value } = placeholders();
    const once = shaped({ id: value("id", "admin") });
    const branchesOnId = (_db: Database, { id }: { id: string }) =>
      id === "admin" ? sql`SELECT 1 WHERE 1` : sql`SELECT ${id}`;
    compiledRun(db, { statement: compiled(branchesOnId), once, values, called: { id: "admin" } });
    // What test/checks/compiled-at-load.grit keeps out of src/: a builder that reads a variable.
    let name = "first";
    const nameFrozen = compiled((_db: Database, _input: Record<string, never>) => sql`SELECT ${name}`);
    for (name of ["first", "second"])
      compiledRun(db, { statement: nameFrozen, once: shaped({}), values: {}, called: {} });
    // Taken out: they are this test's to find, not the file's.
    expect(stale.splice(before).map(difference)).toEqual([
      { builder: "branchesOnId", shape: '{"id":{"name":"id"}}', sent: "SELECT ?", fresh: "SELECT 1 WHERE 1" },
      { builder: "", shape: "{}", sentParams: ["first"], freshParams: ["second"] },
    ]);
  });

  it("takes no input its key would not carry whole: a function, a map, an object with methods", () => {
    // @ts-expect-error A function is no part of JSON: a builder calling it would read what no key holds.
    compiled((_db: Database, { next }: { next: () => string }) => sql`SELECT ${next()}`);
    // @ts-expect-error A map is `{}` as JSON.
    compiled((_db: Database, { seen }: { seen: Map<string, string> }) => sql`SELECT ${seen.get("id")}`);
    // @ts-expect-error Nor an object of methods.
    compiled((_db: Database, { clock }: { clock: { now(): number } }) => sql`SELECT ${clock.now()}`);
    // A placeholder, a date, constants and null are.
    const { value } = placeholders();
    const input = { id: value("id", "x"), at: new Date(0), kind: "cookie", n: 1, none: null };
    expect(JSON.parse(shaped(input).shape)).toEqual({
      id: { name: "id" },
      at: "1970-01-01T00:00:00.000Z",
      kind: "cookie",
      n: 1,
      none: null,
    });
  });

  it("sends what a fresh render gives for a backend's list (listUserSessions), an idle timeout or none each its own shape", async () => {
    const shard: BucketShard = { binding, db, bucket: BASE.bucket, elsewhere: () => null };
    for (const idleCutoff of [BEFORE(1_209_600_000), null, BEFORE(60_000), null])
      await listSessionsByUserId(shard, "someone", { ...BASE.at, idleCutoff });
    expect(stale.map(difference)).toEqual([]);
    // One builder, two shapes, told apart by the idle cutoff alone: a placeholder, or none (whether
    // the deployment slides, which a member's lifetime is judged by, is text: src/db/liveness.ts).
    const lists = [...shapesSent].filter(([statement]) => statement.build.name === "userSessionList");
    expect(lists.flatMap(([, shapes]) => [...shapes].map((shape) => JSON.parse(shape)))).toEqual([
      {
        userId: { name: "userId" },
        at: { now: { name: "now" }, idleCutoff: { name: "idleCutoff" }, slides: false },
        bucket: { name: "bucket" },
        organization: null,
      },
      {
        userId: { name: "userId" },
        at: { now: { name: "now" }, idleCutoff: null, slides: false },
        bucket: { name: "bucket" },
        organization: null,
      },
    ]);
  });
});
