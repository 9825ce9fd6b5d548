import type { Context } from "hono";
import {
  MAX_ORGANIZATION_NAME_LENGTH,
  ORGANIZATION_ID_PATTERN,
  ORGANIZATION_ID_RULE,
  ORGANIZATION_NAME_RULE,
} from "../../domain/organizations/organization.ts";
import {
  type CreateOrganizationInput,
  createOrganization,
  listOrganizations,
  MAX_ORGANIZATIONS_LISTED,
  ORGANIZATIONS_LISTED,
  readOrganization,
  removeOrganization,
  renameOrganization,
} from "../../services/organizations/directory.ts";
import { type AdminEnv, reachOrganization } from "../admin/auth.ts";
import { adminKey, answer, members, ORGANIZATION_ID, object } from "../admin/routes.ts";
import { error, type JsonObject, NO_STORE, ok } from "../openapi-parts.ts";
import { invalidInput, organizationNotFound } from "../refusals.ts";
import { declare, type Member } from "../route.ts";

// The directory of organizations over the admin API (docs/organizations.md), scope
// `organizations`. A key limited to one organization (src/http/admin/auth.ts) reaches its own
// alone: every other id answers 404 `not_found` and is logged, the list holds its own, and
// creating one is outside it.

const ID = { type: "string", pattern: ORGANIZATION_ID_PATTERN.source, description: ORGANIZATION_ID_RULE };
const NAME = {
  type: "string",
  minLength: 1,
  maxLength: MAX_ORGANIZATION_NAME_LENGTH,
  description: `What the product calls the customer: ${ORGANIZATION_NAME_RULE}.`,
};
const TIMESTAMP = { type: "string", format: "date-time" };
const ORGANIZATION = object(["id", "name", "createdAt", "updatedAt"], {
  id: ID,
  name: NAME,
  createdAt: TIMESTAMP,
  updatedAt: TIMESTAMP,
});

const NOT_FOUND = {
  "404": error(
    "No organization has this id; or the key is limited to another (`not_found`, logged); or no admin key is configured.",
    ["organization_not_found", "not_found"],
  ),
};

const query = (name: string, description: string, schema: JsonObject): Member<string | undefined, AdminEnv> => ({
  doc: { name, in: "query", required: false, description, schema },
  read: (c) => c.req.query(name),
});

const LISTED_PARAMETERS = ["limit", "cursor"];

/** The answer of `call`, or 404 when it found no organization. */
function found(c: Context<AdminEnv>, status: 200 | 204, call: () => Promise<unknown>) {
  return answer(c, status, async () => {
    const result = await call();
    if (result === null || result === false) throw organizationNotFound();
    return result;
  });
}

export const ORGANIZATION_ROUTES = [
  declare({
    method: "post",
    path: "/admin/organizations",
    credential: adminKey("organizations"),
    operationId: "adminCreateOrganization",
    summary: "Create an organization: its directory entry, and its policy row on every database",
    description:
      "One batch per database, in parallel. With your own `id`, a retry after a 503 answers the same organization and writes what is missing (docs/organizations.md).",
    body: members<CreateOrganizationInput>(["name"], { name: NAME, id: ID }),
    answers: {
      "201": ok("The organization, as stored.", ORGANIZATION),
      "404": error("The key is limited to an organization (logged); or no admin key is configured.", ["not_found"]),
    },
    handler: (c, { body }) => {
      reachOrganization(c, null);
      return answer(c, 201, () => createOrganization(c.var.scope, body));
    },
  }),
  declare({
    method: "get",
    path: "/admin/organizations",
    credential: adminKey("organizations"),
    operationId: "adminListOrganizations",
    summary: "The directory, a page at a time, in id order (a limited key: its own organization alone)",
    parameters: {
      limit: query("limit", `How many, 1 to ${MAX_ORGANIZATIONS_LISTED}; default ${ORGANIZATIONS_LISTED}.`, {
        type: "integer",
        minimum: 1,
        maximum: MAX_ORGANIZATIONS_LISTED,
      }),
      cursor: query("cursor", "The `nextCursor` of the page before; omitted: the first page.", ID),
    },
    answers: {
      "200": ok(
        "A page; `nextCursor` is null on the last.",
        object(["organizations", "nextCursor"], {
          organizations: { type: "array", items: ORGANIZATION, maxItems: MAX_ORGANIZATIONS_LISTED },
          nextCursor: { anyOf: [ID, { type: "null" }] },
        }),
      ),
    },
    handler: (c, { limit, cursor }) => {
      const stray = Object.keys(c.req.queries()).find((name) => !LISTED_PARAMETERS.includes(name));
      if (stray !== undefined)
        throw invalidInput(`${stray} is not a parameter this call takes (${LISTED_PARAMETERS.join(", ")})`);
      // A whole number as text is the number; anything else goes on as sent, for its rule to refuse.
      const asked = limit !== undefined && /^\d{1,9}$/.test(limit) ? Number(limit) : limit;
      return answer(c, 200, () =>
        listOrganizations(c.var.scope, { limit: asked, cursor }, c.var.adminKey.organization ?? null),
      );
    },
  }),
  declare({
    method: "get",
    path: "/admin/organizations/:id",
    credential: adminKey("organizations"),
    operationId: "adminReadOrganization",
    summary: "An organization",
    parameters: { id: ORGANIZATION_ID },
    answers: { "200": ok("The organization.", ORGANIZATION), ...NOT_FOUND },
    handler: (c, { id }) => found(c, 200, () => readOrganization(c.var.scope, id)),
  }),
  declare({
    method: "patch",
    path: "/admin/organizations/:id",
    credential: adminKey("organizations"),
    operationId: "adminRenameOrganization",
    summary: "Rename an organization",
    parameters: { id: ORGANIZATION_ID },
    body: members<{ name: string }>(["name"], { name: NAME }),
    answers: { "200": ok("The organization, renamed.", ORGANIZATION), ...NOT_FOUND },
    handler: (c, { id, body }) => found(c, 200, () => renameOrganization(c.var.scope, id, body)),
  }),
  declare({
    method: "delete",
    path: "/admin/organizations/:id",
    credential: adminKey("organizations"),
    operationId: "adminRemoveOrganization",
    summary: "Remove an organization: its directory entry and every database's policy row",
    description:
      "One batch per database, in parallel; a retry removes what is left. Its members' sessions stop being live on their next request (docs/organizations.md).",
    parameters: { id: ORGANIZATION_ID },
    answers: { "204": { description: "Removed.", headers: NO_STORE }, ...NOT_FOUND },
    handler: (c, { id }) => found(c, 204, () => removeOrganization(c.var.scope, id)),
  }),
] as const;
