import { scheduled } from "./cron/scheduled.ts";
import { app } from "./http/app.ts";

export type { AppType } from "./http/app.ts";
export { SessionService } from "./rpc/session-service.ts";

export default { fetch: app.fetch, scheduled } satisfies ExportedHandler<Env>;
