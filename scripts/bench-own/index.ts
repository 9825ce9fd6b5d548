// The benchmark's measure of the worker's own time per request (`npm run bench`): inside
// workerd, with no dev server and no network in between, `fetch` of the bare worker
// (scripts/bench-bare/) or of the service's app, called `n` times in a loop by one request.
// A worker's clock stands still while it computes, so the client times the whole request;
// `n` large enough makes the one outer request negligible. Never deployed.
import { app } from "../../src/app.ts";
import bare from "../bench-bare/index.ts";

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const url = new URL(request.url);
    const target = url.searchParams.get("target") === "service" ? app : bare;
    const inner = new URL(url.searchParams.get("path") ?? "/", url);
    const n = Number(url.searchParams.get("n") ?? 1);
    const statuses = new Set<number>();
    for (let i = 0; i < n; i++) {
      const response = await target.fetch(new Request(inner), env, ctx);
      await response.arrayBuffer();
      statuses.add(response.status);
    }
    return Response.json([...statuses]);
  },
} satisfies ExportedHandler<Env>;
