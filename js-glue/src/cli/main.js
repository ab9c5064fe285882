// The CLI's dispatcher: `layerfold COMMAND [options]` -> the command's exit code. --help (or -h)
// prints usage on stdout and exits 0; a missing or unknown command or a bad option prints it on
// stderr and exits 2, as does a command that fails (with its one-line reason, redacted).
import { parseArgs } from 'node:util';

import { redactSecrets } from '../log/redact.js';
import { COMMANDS, usage } from './commands.js';

const HELP = { help: { type: 'boolean', short: 'h', default: false } };

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
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : null;
  if (!command) {
    console.error(`${name === undefined ? '' : `layerfold: unknown command "${name}"\n`}${usage()}`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, ...HELP }, allowPositionals: true });
  } catch (error) {
    console.error(`layerfold ${name}: ${error.message}\n${usage(name)}`);
    return 2;
  }
  if (parsed.values.help) {
    console.log(usage(name));
    return 0;
  }
  const { help, ...values } = parsed.values;
  try {
    return await command.run(values, parsed.positionals);
  } catch (error) {
    // The reason may quote a model or node URL: never with its credentials.
    console.error(`layerfold ${name}: ${redactSecrets(error.message)}`);
    return 2;
  }
}
