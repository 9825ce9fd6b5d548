import { ADMIN_ROUTES } from "./admin/routes.ts";
import { documentOf, documentRoute } from "./openapi.ts";
import { ORGANIZATION_POLICY_ROUTES } from "./organizations/policy-routes.ts";
import { PROVIDER_ROUTES } from "./organizations/providers.ts";
import { ORGANIZATION_ROUTES } from "./organizations/routes.ts";
import { ACCESS_TOKEN_ROUTES } from "./routes/access-tokens.ts";
import { DEVICE_BINDING_ROUTES } from "./routes/device-binding.ts";
import { EVENTS_ROUTES } from "./routes/events.ts";
import { LOGOUT_ROUTES } from "./routes/logout.ts";
import { REPORT_ROUTES } from "./routes/report.ts";
import { SESSIONS_ROUTES } from "./routes/sessions.ts";
import { WHOAMI_ROUTES } from "./routes/whoami.ts";
import { DISCOVERY_ROUTES } from "./ssf/discovery.ts";
import { STREAMS_ROUTES } from "./ssf/streams.ts";
import { INBOUND_ROUTES } from "./upstreams/inbound.ts";
import { UPSTREAM_ROUTES } from "./upstreams/routes.ts";

// Every route the app serves, in the document's order: the one list the router, the parts of the
// origin the app runs middleware on (src/http/app.ts) and the OpenAPI document
// (src/http/openapi.ts) are all built from.
export const ROUTES = [
  ...SESSIONS_ROUTES,
  ...LOGOUT_ROUTES,
  ...EVENTS_ROUTES,
  ...WHOAMI_ROUTES,
  ...ACCESS_TOKEN_ROUTES,
  ...DEVICE_BINDING_ROUTES,
  ...REPORT_ROUTES,
  ...DISCOVERY_ROUTES,
  ...STREAMS_ROUTES,
  ...INBOUND_ROUTES,
  ...UPSTREAM_ROUTES,
  ...ADMIN_ROUTES,
  ...ORGANIZATION_ROUTES,
  ...PROVIDER_ROUTES,
  ...ORGANIZATION_POLICY_ROUTES,
  documentRoute(() => openApiDocument),
] as const;

/** The OpenAPI document, GET /openapi.json's answer. */
export const openApiDocument = documentOf(ROUTES);
