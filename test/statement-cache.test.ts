import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { ByToken } from "../src/db/authenticated.ts";
import { openDatabase } from "../src/db/client.ts";
import type { ContextCheck } from "../src/db/client-context.ts";
import { compiledRun } from "../src/db/compiled.ts";
import { registerBinding } from "../src/db/device-binding.ts";
import { listEvents } from "../src/db/events.ts";
import { reauthenticateSession } from "../src/db/issuing.ts";
import {
  authenticate,
  deleteSession,
  endAllSessionsByToken,
  endOtherSessionsByToken,
  listSessionsByToken,
} from "../src/db/sessions.ts";
import type { Place } from "../src/db/shards.ts";
import type { ClientContext, ContextPolicies } from "../src/domain/client-context.ts";
import { difference, shapesSent, stale } from "./fresh-renders.ts";
import { d1, shardBindings } from "./helpers.ts";

// The statements by token are rendered once per shape and each call's values spliced in
// (src/db/compiled.ts). test/setup.ts compares every one the suite sends with a fresh render
// of its call; here every operation by token runs from one input, then with each field of
// it changed alone, on the cache the runs before it filled: a field that changes the SQL but
// is not in the shape (src/db/authenticated.ts), or a value that is not a placeholder, sends
// an earlier call's statement, which the comparison finds.

const binding = shardBindings()[0] as string;
const db = openDatabase(d1(binding));

/** What an operation by token is called with; its write (`newWrite`) is new on each call. */
type Input = Omit<ByToken, "write"> & { bucket: string };

/** Other values for each field of `T`: a field added to it is a type error here until it is varied. */
type Others<T> = { [K in keyof Required<T>]: T[K][] };

const NOW = new Date("2026-11-02T10:00:00.000Z");
const ID = `AA${"a".repeat(22)}`;
// Every policy acts: each statement of the head is there.
const CHECK: ContextCheck = {
  context: { browser: "Chrome", os: "macOS", country: "DE", asn: 3320 },
  policies: { device: "step-up", network: "end" },
};
const BASE: Input = {
  proof: { id: ID, secretHash: "0".repeat(64), boundHash: null, carrier: "cookie" },
  at: { now: NOW, idleCutoff: null, slidingMaxLifetimeMs: null, stepUpCutoff: null },
  check: CHECK,
  writer: { sessionId: ID, ipAddress: "192.0.2.1", queued: false, adminKeyId: null },
  bucket: "AA",
};
const BEFORE = (ms: number) => new Date(NOW.getTime() - ms);
/** Each field of the input varied (its context check's two parts for `check`, and none). */
const OTHERS: Record<keyof Input, unknown> & {
  proof: Others<Input["proof"]>;
  at: Others<Input["at"]>;
  context: Others<ClientContext>;
  policies: Others<ContextPolicies>;
  writer: Others<Input["writer"]>;
  check: null[];
  bucket: string[];
} = {
  proof: {
    id: [`AA${"b".repeat(22)}`],
    secretHash: ["1".repeat(64)],
    boundHash: ["2".repeat(64), undefined, ""],
    carrier: ["bearer", null],
  },
  at: {
    now: [new Date(NOW.getTime() + 1)],
    idleCutoff: [BEFORE(1_209_600_000)],
    slidingMaxLifetimeMs: [34_560_000_000],
    stepUpCutoff: [BEFORE(300_000)],
  },
  // Safari on macOS is one of Apple's two faces (sameDevice): its pairs are constants of the text.
  context: { browser: ["Firefox", "Safari"], os: ["Windows"], country: [null, "FR"], asn: [null, 64_496] },
  policies: { device: ["allow", "log", "end"], network: ["allow", "log", "step-up"] },
  writer: {
    sessionId: [null, `AA${"c".repeat(22)}`],
    ipAddress: [null, "2001:db8::1"],
    queued: [true],
    adminKeyId: ["AAAAAAAAAAAAAAAAAAAAAA"],
  },
  check: [null],
  bucket: ["AB"],
};

/** `base` with one field of it changed, for each other value of each field. */
function varied<T extends object>(base: T, others: Others<T>): T[] {
  return (Object.keys(others) as (keyof T)[]).flatMap((key) =>
    (others[key as keyof Others<T>] as T[keyof T][]).map((value) => ({ ...base, [key]: value })),
  );
}

/** The base input, then each with one field changed: the runs before each have filled the cache. */
function inputs(): Input[] {
  return [
    BASE,
    ...varied(BASE.proof, OTHERS.proof).map((proof) => ({ ...BASE, proof })),
    ...varied(BASE.at, OTHERS.at).map((at) => ({ ...BASE, at })),
    ...varied(CHECK.context, OTHERS.context).map((context) => ({ ...BASE, check: { ...CHECK, context } })),
    ...varied(CHECK.policies, OTHERS.policies).map((policies) => ({ ...BASE, check: { ...CHECK, policies } })),
    ...varied(BASE.writer, OTHERS.writer).map((writer) => ({ ...BASE, writer })),
    ...OTHERS.check.map((none) => ({ ...BASE, check: none })),
    ...OTHERS.bucket.map((bucket) => ({ ...BASE, bucket })),
  ];
}

const otherId = () => `AA${crypto.randomUUID().replaceAll("-", "").slice(0, 22)}`;

/** Every operation whose batch starts with the head (src/db/authenticated.ts). */
const OPERATIONS: Record<string, (place: Place, input: Input) => Promise<unknown>> = {
  authenticate: (place, { proof, at, check, writer }) => authenticate(place, proof, at, check, writer),
  list: (place, { proof, at, check, writer }) => listSessionsByToken(place, proof, at, check, writer),
  events: (place, { proof, at, check, writer }) => listEvents(place, proof, at, check, writer),
  "delete own": (place, { proof, at, check, writer }) => deleteSession(place, proof, proof.id, writer, at, check),
  "delete other": (place, { proof, at, check, writer }) => deleteSession(place, proof, otherId(), writer, at, check),
  "logout everywhere": (place, { proof, at, check, writer }) => endAllSessionsByToken(place, proof, writer, at, check),
  "logout others": (place, { proof, at, check, writer }) => endOtherSessionsByToken(place, proof, writer, at, check),
  reauthenticate: (place, { proof, at, check, writer }) =>
    reauthenticateSession(
      place,
      proof,
      { secretHash: "3".repeat(64), factors: { pwd: at.now.getTime() }, assuranceLevel: 1 },
      writer,
      at,
      check,
    ),
  "bind a device": (place, { proof, at, check, writer }) =>
    registerBinding(
      place,
      proof,
      { challenge: "challenge", thumbprint: "key", nextChallenge: "next" },
      writer,
      at,
      check,
    ),
};

/** A statement's name: its shape up to the head's part (`list:[…]`, `delete-own:caller:[…]`). */
const nameOf = (shape: string) => shape.slice(0, shape.indexOf(":["));

describe("the statement cache", () => {
  // About 290 batches: longer than the default 5 s on a busy machine.
  it("sends what a fresh render of each call gives, for every operation by token, with each field of its input changed", {
    timeout: 60_000,
  }, async () => {
    for (const input of inputs()) {
      const place: Place = { binding, db, bucket: input.bucket, elsewhere: () => null };
      for (const run of Object.values(OPERATIONS)) await run(place, input);
    }
    expect(stale.map(difference)).toEqual([]);
    expect(new Set([...shapesSent].map(nameOf))).toEqual(
      new Set([
        "contextEvents",
        "contextEnded",
        "activity",
        "list",
        "authenticate:caller",
        "events:caller",
        ...["delete-own", "delete-other", "logout-all", "logout-others"].flatMap((operation) =>
          ["caller", "recorded", "ended", "logged"].map((statement) => `${operation}:${statement}`),
        ),
      ]),
    );
  });

  it("tells a statement of another call from a fresh render: a shape that leaves out what changes the text, a value that is no placeholder", () => {
    const before = stale.length;
    for (const stepUp of [false, true]) {
      const build = () => (stepUp ? sql`SELECT 1 WHERE 1` : sql`SELECT 1`);
      compiledRun(db, { shape: "step-up left out", once: build, values: {}, fresh: build });
    }
    for (const id of ["first", "second"]) {
      const build = () => sql`SELECT ${id}`;
      compiledRun(db, { shape: "id frozen", once: build, values: {}, fresh: build });
    }
    // Taken out: they are this test's to find, not the file's.
    expect(stale.splice(before).map(difference)).toEqual([
      { shape: "step-up left out", sent: "SELECT 1", fresh: "SELECT 1 WHERE 1" },
      { shape: "id frozen", sentParams: ["first"], freshParams: ["second"] },
    ]);
  });
});
