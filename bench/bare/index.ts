// The benchmark's baseline (`npm run bench`): a bare Hono worker, no middleware. `GET /` is the
// baseline every row is divided by; `GET /d1` adds one D1 round trip that reads no table, the
// floor of any answer that needs the database, to tell the service's costs from the platform's.
import { Hono } from "hono";

export default new Hono<{ Bindings: { DB: D1Database } }>()
  .get("/", (c) => c.text("ok"))
  .get("/d1", async (c) => c.json(await c.env.DB.prepare("SELECT 1 AS one").first()));
