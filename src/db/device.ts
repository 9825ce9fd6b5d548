import { inArray, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { type DeviceFace, deviceKeys, facesOf } from "../domain/device.ts";

// "The same device" (src/domain/device.ts `facesOf`, the one rule) in SQL: the context check's
// comparison with the device last seen, and the new-device notice's with the user's other
// sessions. Each answers as `isSameDevice` does (test/context-trace.test.ts holds them together).

/** `isSameDevice(face, { browser, os })`, where `browser` and `os` are SQL (columns, or values bound). */
export function sameDeviceAs(face: DeviceFace, browser: SQLWrapper, os: SQLWrapper): SQL {
  const same = facesOf(face).map((each) => sql`(${browser} = ${each.browser} AND ${os} = ${each.os})`);
  return sql`(${sql.join(same, sql` OR `)})`;
}

/** `key` (a `device_key` column, or a value bound) is of `face`'s device signed in from `country`. */
export function sameDeviceKey(key: SQLWrapper, face: DeviceFace, country: string | null): SQL {
  return inArray(key, deviceKeys(face, country));
}
