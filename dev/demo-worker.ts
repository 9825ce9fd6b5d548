// The first worker `npm run demo` serves: examples/login-worker as it is, plus the way to the
// session service's operator gateway (dev/dev-worker.ts, which the demo runs as the
// service), since wrangler serves only the first worker of a multi-worker dev. The gateway
// refuses any call without the demo's token; the login worker itself knows no such path.
import loginWorker from "../examples/login-worker/src/index.ts";

type LoginEnv = Parameters<typeof loginWorker.fetch>[1] & { SESSION_API: Fetcher };

export default {
  fetch(request: Request, env: LoginEnv, ctx: ExecutionContext) {
    if (new URL(request.url).pathname.startsWith("/__operator/")) return env.SESSION_API.fetch(request);
    return loginWorker.fetch(request, env, ctx);
  },
};
