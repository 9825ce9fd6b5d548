import { app } from "./app.ts";
import { scheduled } from "./scheduled.ts";

export type { AppType } from "./app.ts";
export { SessionService } from "./session-service.ts";

export default { fetch: app.fetch, scheduled } satisfies ExportedHandler<Env>;
