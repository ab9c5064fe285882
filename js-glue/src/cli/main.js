// The CLI's dispatcher: `layerfold COMMAND [options]` -> the command's exit code. --help (or -h)
// prints usage on stdout and exits 0, --version the package's version. A missing or unknown
// command, an unknown option (with the nearest known name) or a value its option does not take
// (options/read_options.js) is refused on stderr with exit 2, as is a command that fails (with
// its one-line reason, redacted).
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

import { redactSecrets } from '../log/redact.js';
import { COMMANDS, usage } from './commands.js';
import { didYouMean } from './options/did_you_mean.js';
import { parseArgsOptions, readOptions } from './options/read_options.js';

const HELP = { help: { type: 'boolean', short: 'h', default: false } };
const { version } = createRequire(import.meta.url)('../../package.json');

// " (did you mean validate?)" when a known name is near the one typed, else "".
function suggestion(typed, known) {
  const near = didYouMean(typed, known);
  return near ? ` (did you mean ${near}?)` : '';
}

// parseArgs' refusal in the CLI's words: an unknown option with the nearest known one.
function parseRefusal(error, options) {
  if (error.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return error.message;
  const typed = /'(-[^']*)'/.exec(error.message)?.[1] ?? '';
  const known = Object.keys(options).map((name) => `--${name}`);
  return `unknown option ${typed}${suggestion(typed, known)}`;
}

/**
 * @param {string[]} argv the arguments after the program name
 * @returns {Promise<number>} the exit code
 * @example process.exit(await runCli(['inspect', 'model.gguf']));
 */
export async function runCli(argv) {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h') {
    console.log(usage());
    return 0;
  }
  if (name === '--version') {
    console.log(version);
    return 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : null;
  if (!command) {
    const unknown = name === undefined ? '' : `layerfold: unknown command "${name}"${suggestion(name, Object.keys(COMMANDS))}\n`;
    console.error(`${unknown}${usage()}`);
    return 2;
  }
  if (command.ownArguments) return fail(name, () => command.run(rest));
  const options = { ...parseArgsOptions(command.options), ...HELP };
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true });
  } catch (error) {
    console.error(`layerfold ${name}: ${parseRefusal(error, options)}; layerfold ${name} --help lists its options`);
    return 2;
  }
  if (parsed.values.help) {
    console.log(usage(name));
    return 0;
  }
  const extra = parsed.positionals.slice(command.positionals ?? 0);
  if (extra.length > 0) {
    console.error(`layerfold ${name}: unexpected argument ${JSON.stringify(extra[0])}; layerfold ${name} --help lists its options`);
    return 2;
  }
  return fail(name, () => command.run(readOptions(command.options, parsed.values, process.env), parsed.positionals));
}

// The command's exit code from run(), or 2 with its one-line reason when it throws. The reason
// may quote a model or node URL: never with its credentials.
async function fail(name, run) {
  try {
    return await run();
  } catch (error) {
    console.error(`layerfold ${name}: ${redactSecrets(error.message)}`);
    return 2;
  }
}
