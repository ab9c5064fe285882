#!/usr/bin/env node
// layerfold CLI: validate a model through a pipeline of layer nodes, inspect a GGUF.
import { parseArgs } from 'node:util';

import { validate } from '../src/cli_validate.js';
import { inspect } from '../src/cli_inspect.js';

const USAGE = `usage:
  layerfold validate [--model PATH] [--prompt TEXT] [--expect TEXT] [--top-k N] [--threads N]
                     [--nodes local:A-B,...] [--build threaded|single] [--json]
  layerfold inspect MODEL [--json]`;

const COMMANDS = {
  validate: {
    run: validate,
    options: {
      model: { type: 'string' },
      prompt: { type: 'string', default: 'The capital of France is' },
      expect: { type: 'string', default: ' Paris' },
      'top-k': { type: 'string', default: '5' },
      threads: { type: 'string' },
      nodes: { type: 'string' },
      build: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  },
  inspect: { run: inspect, options: { json: { type: 'boolean', default: false } } },
};

async function main(argv) {
  const command = COMMANDS[argv[0]];
  if (!command) {
    console.error(USAGE);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: argv.slice(1), options: command.options, allowPositionals: true });
  } catch (error) {
    console.error(`layerfold: ${error.message}\n${USAGE}`);
    return 2;
  }
  try {
    return await command.run(parsed.values, parsed.positionals);
  } catch (error) {
    console.error(`layerfold ${argv[0]}: ${error.message}`);
    return 2;
  }
}

process.exitCode = await main(process.argv.slice(2));
