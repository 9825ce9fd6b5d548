// Writes the document src/http/routes.ts builds (what GET /openapi.json serves) to a file, for
// the tools that read one: Redocly's linter, openapi-typescript and Prism's proxy.
//   node test/checks/openapi-json.ts [file]      (default dist/openapi.json)
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { openApiDocument } from "../../src/http/routes.ts";

const file = process.argv[2] ?? "dist/openapi.json";
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, `${JSON.stringify(openApiDocument, null, 2)}\n`);
