// What a session's device is: the types a device can have and the one rule of what "the same
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

/** A device as "the same device" compares it: browser family and OS, "" when the User-Agent names none. */
export interface DeviceFace {
  browser: string;
  os: string;
}

/** A parsed device's face: the browser's version left out, since browsers update themselves every few weeks. */
export function faceOf(device: Pick<Device, "browser" | "os">): DeviceFace {
  return { browser: device.browser?.replace(/ \d+$/, "") ?? "", os: device.os ?? "" };
}

/**
 * Apple's Safari on iOS and iPadOS, as itself and as it asks for desktop sites (an iPad by
 * default, an iPhone on request), when it says it is Safari on macOS: two faces of one device.
 */
const APPLE_SAFARI: readonly DeviceFace[] = [
  { browser: "Mobile Safari", os: "iOS" },
  { browser: "Safari", os: "macOS" },
];

/**
 * The one rule of "the same device", for the context check and the new-device notice alike: the
 * faces the device that shows `face` may show, itself or both of Apple's Safari. `isSameDevice`
 * answers by it in TypeScript, src/db/device.ts in SQL.
 */
export function facesOf(face: DeviceFace): readonly DeviceFace[] {
  return APPLE_SAFARI.some(({ browser, os }) => browser === face.browser && os === face.os) ? APPLE_SAFARI : [face];
}

/** Whether `other` is the device that showed `face`. */
export function isSameDevice(face: DeviceFace, other: DeviceFace): boolean {
  return facesOf(face).some(({ browser, os }) => browser === other.browser && os === other.os);
}

/**
 * What a session stores of its device for the new-device notice: its face and the country it
 * signed in from, as one text.
 */
export function deviceKey(face: DeviceFace, country: string | null): string {
  return [face.browser, face.os, country ?? ""].join("|");
}

/** The keys a sign-in of `face`'s device from `country` matches: a session or an ended one with one of them had the same device. */
export function deviceKeys(face: DeviceFace, country: string | null): string[] {
  return facesOf(face).map((each) => deviceKey(each, country));
}
