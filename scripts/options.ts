// How every operator command reads its arguments and refuses bad ones: node's parseArgs, with
// values that may begin with "-", and one way out for bad input (the problem, the usage, exit 2).
import { type ParseArgsOptionsConfig, parseArgs } from "node:util";
import { type ServerAsked, serverAsked } from "../dev/dev-server.ts";

/** Bad arguments: nothing was done. */
export function refuse(problem: string, usage: string): never {
  console.error(`${problem}\n${usage}`);
  process.exit(2);
}

/**
 * `--id -PPO…` as `--id=-PPO…`: ids are base64url, and one in 64 begins with "-" (a session's
 * bucket, a receiver's random first character), which parseArgs would take for an option
 * ("argument is ambiguous"). Only a word that is itself one of the options (`--env`,
 * `--env=x`, `-e`) is not taken for a value, so a forgotten value is still refused.
 */
export function valuesMayStartWithDash(args: string[], options: ParseArgsOptionsConfig): string[] {
  const names = Object.entries(options);
  const isOption = (word: string) =>
    names.some(
      ([name, { short }]) =>
        word === `--${name}` || word.startsWith(`--${name}=`) || (short !== undefined && word === `-${short}`),
    );
  /** The option `word` names if it takes a value, as its long name. */
  const takingValue = (word: string) =>
    names.find(
      ([name, { type, short }]) =>
        type === "string" && (word === `--${name}` || (short !== undefined && word === `-${short}`)),
    )?.[0];
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const [arg, next] = [args[i] as string, args[i + 1]];
    const name = takingValue(arg);
    if (name !== undefined && next?.startsWith("-") && !isOption(next)) {
      joined.push(`--${name}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

/**
 * The one command among `positionals` that `needs` names (command → the options it requires),
 * with no option but those and `shared` (command → options it may take besides): anything
 * else is refused with `usage`.
 */
export function commandOf(
  positionals: string[],
  values: Record<string, unknown>,
  needs: Record<string, string[]>,
  usage: string,
  shared: (command: string) => string[] = () => [],
): string {
  const [command] = positionals;
  const names = Object.keys(needs);
  if (positionals.length !== 1 || command === undefined || !names.includes(command))
    refuse(`one command: ${names.slice(0, -1).join(", ")} or ${names.at(-1)}`, usage);
  const required = needs[command] as string[];
  const allowed = [...required, ...shared(command)];
  const stray = Object.keys(values).find((name) => !allowed.includes(name));
  if (stray) refuse(`--${stray} does not apply to ${command}`, usage);
  const missing = required.find((name) => values[name] === undefined);
  if (missing) refuse(`--${missing} is required`, usage);
  return command;
}

/**
 * parseArgs on `args` (values may begin with "-"); bad arguments are refused with `usage`.
 * `--help` or `-h` (not as an option's value) prints `usage` and exits 0: asked for, it is no error.
 */
export function parseOptions<const T extends ParseArgsOptionsConfig>(
  args: string[],
  options: T,
  usage: string,
  allowPositionals = false,
) {
  const joined = valuesMayStartWithDash(args, options);
  if (joined.includes("--help") || joined.includes("-h")) {
    console.log(usage);
    process.exit(0);
  }
  try {
    return parseArgs({ args: joined, options, allowPositionals, strict: true });
  } catch (error) {
    refuse(error instanceof Error ? error.message : String(error), usage);
  }
}

/** What `--server` does, for the usage of every command that takes it. */
export const SERVER_USAGE = `--server <port|URL>: the running npm start or npm run demo to work through (its environment, unless
  --env is given), needed while two serve one environment; one that does not answer is refused, nothing done.
  The server used (or, with none serving, the local files) is named first, on stderr.`;

/** `--server` given with `--<option>` (`remote`, `persist-to`): a server's databases are the local ones. */
export function refuseServerWith(option: string, usage: string): never {
  refuse(`--server goes with local databases served by npm start, not with --${option}`, usage);
}

/**
 * `--server <port|URL>`, read: the running `npm start` or `npm run demo` an operator command
 * must work through (dev/dev-server.ts); undefined when not given. Anything else is refused.
 */
export function serverOption(value: string | undefined, usage: string): ServerAsked | undefined {
  if (value === undefined) return undefined;
  try {
    return serverAsked(value);
  } catch (error) {
    refuse(error instanceof Error ? error.message : String(error), usage);
  }
}
