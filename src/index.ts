import { app } from "./app.ts";
import { scheduled } from "./scheduled.ts";

export { SessionService } from "./session-service.ts";
export type { AppType } from "./app.ts";

export default { fetch: app.fetch, scheduled } satisfies ExportedHandler<Env>;
