// Every log line the service writes: one JSON object, `level` and `event` first, then the
// event's fields, for Workers Logs to index. In the bottom layer so that every layer that
// logs (src/db/ included) writes its lines the same way. Nothing secret goes in a field:
// each caller says what it puts there (src/services/failure-log.ts redacts messages).

export type LogLevel = "info" | "warn" | "error";

/** The console method a line goes out through: the level's own unless the caller names another. */
export type LogChannel = "log" | "warn" | "error";

const CHANNEL: Record<LogLevel, LogChannel> = { info: "log", warn: "warn", error: "error" };

/** Writes `{"level":…,"event":…,…fields}` as one line, through `channel`; no field replaces the level or event. */
export function logLine<Fields extends object>(
  level: LogLevel,
  event: string,
  fields?: Fields & { level?: never; event?: never },
  channel: LogChannel = CHANNEL[level],
): void {
  console[channel](JSON.stringify({ level, event, ...fields }));
}
