// What a session's device is: the types a device can have and what "the same
// device" means. Parsing a user agent into one is src/domain/user-agent.ts, kept apart so that
// what needs only the types (the schema, drizzle-kit) does not load the parser.

// The one list: the type, the schema's column enum and the OpenAPI document derive from it.
export const DEVICE_TYPES = ["desktop", "mobile", "tablet", "bot", "unknown"] as const;
export type DeviceType = (typeof DEVICE_TYPES)[number];

export interface Device {
  browser: string | null;
  os: string | null;
  type: DeviceType;
}

/**
 * What "the same device" means for new-device detection: browser family, OS and country.
 * The browser's version is left out: browsers update themselves every few weeks, and an
 * update is not a new device.
 */
export function deviceKey(device: Pick<Device, "browser" | "os">, country: string | null): string {
  return [device.browser?.replace(/ \d+$/, "") ?? "", device.os ?? "", country ?? ""].join("|");
}
