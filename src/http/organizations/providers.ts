import { ENTRY_MEMBERS } from "../../domain/organizations/providers.ts";
import { MAX_UPSTREAM_NAME_LENGTH } from "../../domain/upstreams/config.ts";
import { PROVIDER_CACHE_SECONDS } from "../../services/organizations/acting-providers.ts";
import {
  changeProvider,
  listProviders,
  type ProviderRefusal,
  type ProviderView,
  readProvider,
  registerProvider,
  removeProvider,
} from "../../services/organizations/providers.ts";
import { adminKey, answer, jsonBody, ORGANIZATION_ID, object, pathParameter, scopeOf } from "../admin/routes.ts";
import { apiError } from "../errors.ts";
import { error, type JsonObject, ok } from "../openapi-parts.ts";
import { invalidInput, notFound } from "../refusals.ts";
import { declare } from "../route.ts";

// An organization's identity providers over the admin API (docs/organization-providers.md):
// each an SSF_UPSTREAMS entry, checked by the var's own rules, registered, changed and removed
// without a deploy. Scope `organizations`; a key limited to another organization is answered 404
// (reachOrganization), as a missing organization is.

const MEMBERS = [...ENTRY_MEMBERS, "enabled", "authorization"];

const ENTRY: JsonObject = {
  name: {
    type: "string",
    pattern: `^[A-Za-z0-9._-]{1,${MAX_UPSTREAM_NAME_LENGTH}}$`,
    description: "Unique in the deployment (no SSF_UPSTREAMS entry has it); never changes.",
  },
  issuer: { type: "string" },
  client_id: { type: "string" },
  jwks: { type: "object" },
  jwks_uri: { type: "string" },
  audience: { type: "string" },
  subject: { enum: ["iss_sub", "opaque"] },
  subjects_are_user_ids: { type: "boolean" },
  events: { type: "object" },
  region: { type: "string" },
  acr_levels: { type: "object" },
  push: { type: "object" },
  enabled: { type: "boolean", description: "False: kept, but it acts on nothing. Default true." },
};

const INPUT = (required: string[]) =>
  object(required, {
    ...ENTRY,
    authorization: {
      type: ["string", "null"],
      description:
        "Write-only: the `Authorization` its `push` carries, stored encrypted (ORGANIZATION_SECRETS_KEYS), never answered. Absent: kept; null: removed.",
    },
  });

const VIEW = {
  type: "object",
  required: ["name", "issuer", "organizationId", "enabled", "authorization", "createdAt", "updatedAt"],
  properties: {
    ...ENTRY,
    organizationId: { type: "string" },
    authorization: object(["set"], { set: { type: "boolean" } }),
    createdAt: { type: "string", format: "date-time" },
    updatedAt: { type: "string", format: "date-time" },
  },
  additionalProperties: false,
};

const PROVIDER = pathParameter("provider", "The provider's name.");
const MISSING = error("No such organization, none the key may reach, or no provider of that name in it.", [
  "not_found",
]);
const RULES =
  "Checked by the rules of an SSF_UPSTREAMS entry (docs/identity-providers.md#configuring-an-upstream): a broken one is a 400 `invalid_input` naming the member, nothing written; so is an `authorization` while ORGANIZATION_SECRETS_KEYS is unset.";
const BOUND = `Other isolates see the change within ${PROVIDER_CACHE_SECONDS} seconds; this one at once.`;

/** The service's answer, or its refusal. */
function provided<T>(result: T | ProviderRefusal): T {
  if (result === "no_organization" || result === "not_found") throw notFound();
  if (result === "name_taken") throw apiError(409, "provider_name_taken");
  if (result === "changed") throw apiError(409, "provider_changed");
  if (result === "no_secrets_key")
    throw invalidInput(
      "authorization needs the Worker secret ORGANIZATION_SECRETS_KEYS (npm run organization:keys), which is unset: nothing is stored in clear",
    );
  return result as T;
}

const path = "/admin/organizations/:id/providers";

const changed = (method: "put" | "patch", mode: "replace" | "merge", summary: string) =>
  declare({
    method,
    path: `${path}/:provider`,
    credential: adminKey("organizations", "Two database round trips (read, then written if unchanged)"),
    operationId: method === "put" ? "adminReplaceProvider" : "adminChangeProvider",
    summary,
    description: `${RULES} The Authorization is kept unless \`authorization\` is sent, and dropped with \`push\`. ${BOUND}`,
    parameters: { id: ORGANIZATION_ID, provider: PROVIDER },
    body: jsonBody(INPUT(mode === "replace" ? ["issuer"] : []), MEMBERS),
    answers: {
      "200": ok("The provider as stored.", VIEW),
      "404": MISSING,
      "409": error("Changed by another call meanwhile; nothing written.", ["provider_changed"]),
    },
    handler: (c, { id, provider, body }) =>
      answer(c, 200, async () =>
        provided<ProviderView>(await changeProvider(scopeOf(c), c.env, id, provider, body, mode)),
      ),
  });

export const PROVIDER_ROUTES = [
  declare({
    method: "post",
    path,
    credential: adminKey("organizations"),
    operationId: "adminRegisterProvider",
    summary: "Register an identity provider of an organization, as an SSF_UPSTREAMS entry, without a deploy",
    description: RULES,
    parameters: { id: ORGANIZATION_ID },
    body: jsonBody(INPUT(["name", "issuer"]), MEMBERS),
    answers: {
      "201": ok("The provider as stored; it acts at once.", VIEW),
      "404": MISSING,
      "409": error("The name is taken (by a provider or SSF_UPSTREAMS).", ["provider_name_taken"]),
    },
    handler: (c, { id, body }) =>
      answer(c, 201, async () => provided<ProviderView>(await registerProvider(scopeOf(c), c.env, id, body))),
  }),
  declare({
    method: "get",
    path,
    credential: adminKey("organizations"),
    operationId: "adminListProviders",
    summary: "An organization's identity providers",
    parameters: { id: ORGANIZATION_ID },
    answers: {
      "200": ok("By name.", object(["providers"], { providers: { type: "array", items: VIEW } })),
      "404": MISSING,
    },
    handler: (c, { id }) =>
      answer(c, 200, async () => ({
        providers: provided<ProviderView[]>(await listProviders(scopeOf(c), id)),
      })),
  }),
  declare({
    method: "get",
    path: `${path}/:provider`,
    credential: adminKey("organizations"),
    operationId: "adminReadProvider",
    summary: "One identity provider of an organization",
    parameters: { id: ORGANIZATION_ID, provider: PROVIDER },
    answers: { "200": ok("The provider as stored.", VIEW), "404": MISSING },
    handler: (c, { id, provider }) =>
      answer(c, 200, async () => provided<ProviderView>(await readProvider(scopeOf(c), id, provider))),
  }),
  changed("put", "replace", "Replace an identity provider of an organization (its name stays)"),
  changed("patch", "merge", "Change members of an identity provider of an organization (null removes one)"),
  declare({
    method: "delete",
    path: `${path}/:provider`,
    credential: adminKey("organizations"),
    operationId: "adminRemoveProvider",
    summary: "Remove an identity provider of an organization",
    description: `Its routes answer 404 and sign-ins naming it are refused. ${BOUND}`,
    parameters: { id: ORGANIZATION_ID, provider: PROVIDER },
    answers: { "200": ok("Removed.", object(["removed"], { removed: { const: true } })), "404": MISSING },
    handler: (c, { id, provider }) =>
      answer(c, 200, async () => {
        if (!(await removeProvider(scopeOf(c), id, provider))) throw notFound();
        return { removed: true };
      }),
  }),
] as const;
