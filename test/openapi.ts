import { encodePointer, Validator } from "@cfworker/json-schema";
import { HTTP_METHODS, type HttpMethod, type JsonObject, type PathItem, type Responses } from "../src/http/openapi.ts";
import { openApiDocument } from "../src/http/routes.ts";

// Checks a response against the OpenAPI document (src/http/openapi.ts, built from src/http/routes.ts): its status must be one the document lists for
// that path and method, its JSON body must match that status's schema, the headers it
// requires must be present (and every documented header must match its schema), and the
// contract's headers it does not document for that status must be absent.

const DOC_URI = "https://session-service.invalid/openapi.json";
// The validator annotates the schemas it compiles: keep the worker's copy pristine.
const doc = structuredClone(openApiDocument);
// Headers with a contract of their own: never on a response that does not document them.
const CONTRACT_HEADERS = ["WWW-Authenticate", "Allow", "Retry-After", "Set-Cookie"];

type Pointer = readonly string[];
interface Located {
  value: JsonObject;
  pointer: Pointer;
}

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

function at(pointer: Pointer): unknown {
  let value: unknown = doc;
  for (const key of pointer) value = isObject(value) ? value[key] : undefined;
  return value;
}

/** Follows a local `$ref` (responses, headers) to the object it names. */
function resolve(pointer: Pointer): Located {
  const value = at(pointer);
  if (!isObject(value)) throw new Error(`OpenAPI document: nothing at #/${pointer.join("/")}`);
  const target = value.$ref;
  if (typeof target !== "string") return { value, pointer };
  if (!target.startsWith("#/")) throw new Error(`OpenAPI document: unsupported $ref ${target}`);
  return resolve(target.slice(2).split("/"));
}

// One compiled validator per schema location, against the whole document so `$ref`s resolve.
const validators = new Map<string, Validator>();
function validatorAt(pointer: Pointer): Validator {
  const uri = `${DOC_URI}#${pointer.map((key) => `/${encodePointer(key)}`).join("")}`;
  let validator = validators.get(uri);
  if (!validator) {
    validator = new Validator({ $ref: uri }, "2020-12", false);
    validator.addSchema(doc as never, DOC_URI);
    validators.set(uri, validator);
  }
  return validator;
}

function schemaErrors(pointer: Pointer, instance: unknown, where: string): string[] {
  const { valid, errors } = validatorAt(pointer).validate(instance);
  if (valid) return [];
  // Only the errors that say what is wrong, not the enclosing "did not match" ones.
  const enclosing = new Set(["$ref", "allOf", "properties", "items"]);
  const specific = errors.filter((e) => !enclosing.has(e.keyword));
  return [
    ...new Set(
      (specific.length > 0 ? specific : errors).map((e) => `${where}${e.instanceLocation.slice(1)}: ${e.error}`),
    ),
  ];
}

const templates = Object.keys(doc.paths).map((template) => ({
  template,
  pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]*")}$`),
}));

/** A literal path before a template; a path parameter may be empty (`/auth/sessions/`). */
function matchPath(pathname: string): string | undefined {
  return (
    (doc.paths[pathname] ? pathname : undefined) ?? templates.find(({ pattern }) => pattern.test(pathname))?.template
  );
}

function methodsOf(item: PathItem): string[] {
  const methods = HTTP_METHODS.filter((m) => item[m] !== undefined).map((m) => m.toUpperCase());
  return item.get !== undefined && item.head === undefined ? [...methods, "HEAD"] : methods;
}

/** Where each status this request may answer is documented. */
function documentedResponses(
  method: string,
  pathname: string,
): { template?: string; candidates: Map<string, Pointer> } {
  const candidates = new Map<string, Pointer>();
  const add = (pointer: Pointer) => {
    const responses = at(pointer) as Responses | undefined;
    for (const status of Object.keys(responses ?? {}))
      if (!candidates.has(status)) candidates.set(status, [...pointer, status]);
  };
  const template = matchPath(pathname);
  const item = template === undefined ? undefined : doc.paths[template];
  const key = method === "HEAD" ? "get" : method.toLowerCase();
  if (template !== undefined && HTTP_METHODS.some((m) => m === key) && item?.[key as HttpMethod] !== undefined) {
    add(["paths", template, key, "responses"]);
  } else {
    if (template !== undefined && item?.["x-other-methods"] !== undefined) add(["paths", template, "x-other-methods"]);
    else add(["x-unknown-path"]);
    add(["x-any-request"]);
  }
  if (method === "OPTIONS") add(["x-cors-preflight"]);
  return template === undefined ? { candidates } : { template, candidates };
}

/** Throws unless `response` is what the document says `method url` may answer. */
export async function validateResponse(method: string, url: string, response: Response): Promise<void> {
  method = method.toUpperCase();
  const { pathname, search } = new URL(url);
  const path = pathname + search;
  const { template, candidates } = documentedResponses(method, pathname);
  const status = String(response.status);
  const errors: string[] = [];
  const where = candidates.get(status);
  if (!where) {
    errors.push(
      `status ${status} is not documented for ${template ?? "an unknown path"} (documented: ${[...candidates.keys()].join(", ")})`,
    );
  } else {
    const documented = resolve(where);
    const headers = isObject(documented.value.headers) ? documented.value.headers : {};
    for (const name of Object.keys(headers)) {
      const header = resolve([...documented.pointer, "headers", name]);
      const value = response.headers.get(name);
      if (value === null) {
        if (header.value.required === true) errors.push(`header ${name} is required`);
        continue;
      }
      const schema = resolve([...header.pointer, "schema"]);
      // Headers are strings on the wire: an integer header is checked as the number it spells.
      const instance = schema.value.type === "integer" && /^\d+$/.test(value) ? Number(value) : value;
      errors.push(...schemaErrors(schema.pointer, instance, `header ${name}`));
    }
    for (const name of CONTRACT_HEADERS) {
      if (!Object.keys(headers).some((h) => h.toLowerCase() === name.toLowerCase()) && response.headers.has(name)) {
        errors.push(`header ${name} is not documented for this response: ${response.headers.get(name)}`);
      }
    }
    if (status === "405" && template !== undefined) {
      const item = doc.paths[template] as PathItem;
      const allow = (response.headers.get("Allow") ?? "")
        .split(",")
        .map((m) => m.trim())
        .sort();
      const expected = methodsOf(item).sort();
      if (allow.join() !== expected.join())
        errors.push(`Allow lists ${allow.join(", ")}, the document ${expected.join(", ")}`);
    }
    const content = documented.value.content;
    const text = await response.clone().text();
    // JSON bodies: application/json, or a JSON media type of its own (the key set's application/jwk-set+json).
    const mediaType = isObject(content)
      ? Object.keys(content).find((type) => /^application\/([\w.-]+\+)?json$/.test(type))
      : undefined;
    if (isObject(content) && mediaType !== undefined) {
      const type = response.headers.get("Content-Type") ?? "";
      if ((type.split(";")[0] ?? "").trim().toLowerCase() !== mediaType)
        errors.push(`Content-Type is ${type || "absent"}, not ${mediaType}`);
      if (method === "HEAD") {
        if (text !== "") errors.push("a HEAD response has a body");
      } else {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          errors.push(`body is not JSON: ${text.slice(0, 200)}`);
        }
        if (body !== undefined)
          errors.push(...schemaErrors([...documented.pointer, "content", mediaType, "schema"], body, "body"));
      }
    } else if (text !== "") {
      errors.push(`body documented as empty, got: ${text.slice(0, 200)}`);
    }
  }
  if (errors.length > 0) {
    throw new Error(
      `Response does not match the OpenAPI document: ${method} ${path} → ${status}\n- ${errors.join("\n- ")}`,
    );
  }
}
