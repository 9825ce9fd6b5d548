import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

// The single description of the table: migrations are generated from this file.
export const sessions = sqliteTable(
  "sessions",
  {
    // Public: listed to the user and used in URLs. Also the first half of the token.
    id: text("id").primaryKey(),
    // SHA-256 (hex) of the token's secret half; the token itself is never stored.
    secretHash: text("secret_hash").notNull(),
    userId: text("user_id").notNull(),
    // Null when the client address was unknown or did not parse as an IP.
    ipAddress: text("ip_address"),
    userAgent: text("user_agent").notNull(),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    expiresAt: integer("expires_at", { mode: "timestamp_ms" }).notNull(),
  },
  (table) => [
    // "Live sessions of this user": equality on user_id, range on expires_at.
    index("sessions_user_id_expires_at_idx").on(table.userId, table.expiresAt),
    // The scheduled purge walks expired rows oldest first.
    index("sessions_expires_at_idx").on(table.expiresAt),
  ],
);

export type SessionRow = typeof sessions.$inferSelect;
