import { fillPlaceholders, type Query } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { type Compiled, reportSent } from "../src/db/compiled.ts";

// Every compiled statement (src/db/compiled.ts), as each test file sends it, compared with a fresh
// render of its builder on the call's own values: test/setup.ts turns this on for the whole suite
// and fails a file that sent what its values would not (a builder that branches on a placeholder
// as if it were its value).

/** A statement sent, by its builder's name and its shape: what went to D1 (text and parameters), and what a fresh render of its call gives. */
export type Comparison = { builder: string; shape: string; sent: Query; fresh: Query };

const dialect = new SQLiteAsyncDialect();

/** The shapes sent in this file so far, by statement: each pair rendered once. */
export const shapesSent = new Map<Compiled<never>, Set<string>>();

/** The statements sent in this file that a fresh render of their call would not have sent. */
export const stale: Comparison[] = [];

/** A query's text and parameters, as one value to tell apart. */
const asOne = ({ sql, params }: Query) => JSON.stringify([sql, params]);

export function compareEveryStatement(): void {
  reportSent(({ statement, once, values, called }, db, sent) => {
    const shapes = shapesSent.get(statement) ?? new Set();
    shapesSent.set(statement, shapes.add(once.shape));
    const made = dialect.sqlToQuery(statement.build(db, called).getSQL());
    const comparison = {
      builder: statement.build.name,
      shape: once.shape,
      sent: { sql: sent.sql, params: sent.params },
      // The operation's own placeholders (the bucket, a target id) are the call's in both.
      fresh: { sql: made.sql, params: fillPlaceholders(made.params, values) },
    };
    if (asOne(comparison.sent) !== asOne(comparison.fresh)) stale.push(comparison);
  });
}

/** Where a stale statement differs from a fresh render: the text around the first difference, or the parameters. */
export function difference({ builder, shape, sent, fresh }: Comparison) {
  if (sent.sql === fresh.sql) return { builder, shape, sentParams: sent.params, freshParams: fresh.params };
  let at = 0;
  while (sent.sql[at] === fresh.sql[at]) at++;
  const around = (text: string) => text.slice(Math.max(0, at - 60), at + 60);
  return { builder, shape, sent: around(sent.sql), fresh: around(fresh.sql) };
}
