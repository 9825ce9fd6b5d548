import { randomBase64Url } from "../token.ts";

// An organization: an enterprise customer of the product, with its own identity providers,
// session policy and admin keys (docs/organizations.md). Its id is the service's, never the
// customer's: stable, opaque, and never reused once removed.

/** `org_` and 16 random bytes in base64url: what every organization id is. */
export const ORGANIZATION_ID_PATTERN = /^org_[A-Za-z0-9_-]{22}$/;

export function isOrganizationId(value: unknown): value is string {
  return typeof value === "string" && ORGANIZATION_ID_PATTERN.test(value);
}

export function newOrganizationId(): string {
  return `org_${randomBase64Url(16)}`;
}
