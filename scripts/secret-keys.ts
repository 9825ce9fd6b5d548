// The keys that seal what organizations give the service to keep secret (their providers' push
// Authorization): the secret ORGANIZATION_SECRETS_KEYS, read by src/domain/organizations/secrets.ts.
// Output is the new key list on stdout, for `wrangler secret put`; nothing is logged.
//   npm run --silent organization:keys -- new > keys.json
//   npm run --silent organization:keys -- rotate < keys.json > new-keys.json
// `rotate` puts a new key first (it seals from then on) and keeps the others, which still open
// what they sealed; drop an old key only once every provider's Authorization was sent again.
import { readFileSync } from "node:fs";
import { readSecretKeys } from "../src/domain/organizations/secrets.ts";
import { refuse } from "./options.ts";

const USAGE = `usage: npm run --silent organization:keys -- new
       npm run --silent organization:keys -- rotate < keys.json`;

const newKey = () => ({
  kty: "oct",
  kid: crypto.randomUUID(),
  k: Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url"),
});

const [command, ...rest] = process.argv.slice(2);
if (rest.length > 0 || (command !== "new" && command !== "rotate")) refuse("one command: new or rotate", USAGE);
if (command === "new") console.log(JSON.stringify([newKey()]));
else {
  const text = readFileSync(0, "utf8");
  // The same rules the worker reads them by: a list it would refuse is refused here.
  try {
    readSecretKeys({ ORGANIZATION_SECRETS_KEYS: text });
  } catch (error) {
    refuse((error as Error).message, USAGE);
  }
  console.log(JSON.stringify([newKey(), ...JSON.parse(text)]));
}
