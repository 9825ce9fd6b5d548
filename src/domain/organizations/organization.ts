import { InvalidInput } from "../invalid-input.ts";
import { randomBase64Url } from "../token.ts";

// An organization: an enterprise customer of the product, with its own identity providers,
// session policy and admin keys (docs/organizations.md). Its id is the service's, never the
// customer's: stable, opaque, and never reused once removed.

/** `org_` and 16 random bytes in base64url: what every organization id is. */
export const ORGANIZATION_ID_PATTERN = /^org_[A-Za-z0-9_-]{22}$/;

export const ORGANIZATION_ID_RULE = "an organization id: org_ and 22 characters of A-Z, a-z, 0-9, _ or -";

export function isOrganizationId(value: unknown): value is string {
  return typeof value === "string" && ORGANIZATION_ID_PATTERN.test(value);
}

export function newOrganizationId(): string {
  return `org_${randomBase64Url(16)}`;
}

/** `member` as an organization id, refused as InvalidInput naming it. */
export function checkOrganizationId(value: unknown, member: string): string {
  if (!isOrganizationId(value)) throw new InvalidInput(`${member} must be ${ORGANIZATION_ID_RULE}`);
  return value;
}

export const MAX_ORGANIZATION_NAME_LENGTH = 100;

export const ORGANIZATION_NAME_RULE = `1 to ${MAX_ORGANIZATION_NAME_LENGTH} printable characters, no leading or trailing space`;

/** A display name: shown to admins and on the devices page, so printable and short. */
export function checkOrganizationName(name: unknown): string {
  if (
    typeof name !== "string" ||
    name.trim() !== name ||
    name === "" ||
    name.length > MAX_ORGANIZATION_NAME_LENGTH ||
    /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u.test(name)
  )
    throw new InvalidInput(`name must be ${ORGANIZATION_NAME_RULE}`);
  return name;
}

/** An organization as the directory answers it. */
export interface OrganizationView {
  id: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}
