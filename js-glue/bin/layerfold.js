#!/usr/bin/env node
// layerfold CLI: validate a model through a pipeline of layer nodes, inspect a GGUF, serve a layer node.
import { parseArgs } from 'node:util';

import { APPROX_CLI_OPTIONS, APPROX_USAGE } from '../src/cli/approx.js';
import { calibrateExit } from '../src/cli/calibrate_exit.js';
import { validate } from '../src/cli/validate.js';
import { generate } from '../src/cli/generate.js';
import { inspect } from '../src/cli/inspect.js';
import { plan } from '../src/cli/plan.js';
import { SERVE_OPTIONS, serveCommand } from '../src/cli/serve.js';

const USAGE = `usage:
  layerfold validate [--model PATH] [--prompt TEXT] [--expect TEXT] [--top-k N] [--threads N]
                     [--nodes SPEC] [--build threaded|single] [--cache-dir DIR] [--json]
  MODEL / PATH: a local path, or an http(s)://, s3:// or r2:// URL (cached under --cache-dir)
${APPROX_USAGE}
  SPEC: nodes in pipeline order, "local:0-29" (layers run here) or "http://HOST:PORT" (a layer node,
        see serve; bearer token from AUTH_TOKEN), e.g. local:0-29,http://10.0.0.7:8080
  layerfold generate [--model PATH] [--prompt TEXT] [--chat] [--max-tokens N] [--temperature T]
                     [--top-k K] [--top-p P] [--seed S] [--threads N] [--nodes SPEC] [--json]
  layerfold calibrate-exit --model PATH --corpus FILE [--agreement 0.99] [--exit-window 2] [--positions 256]
                           [--threads N] [--nodes SPEC] [--build threaded|single] [--json]
  layerfold inspect MODEL [--json]
  layerfold plan MODEL --nodes K [--memory BYTES] [--json]
  layerfold serve --model URL [--layers A-B] [--threads N] [--port P] [--host H] [--cache-dir DIR]
                  [--max-sessions N] [--max-kv-bytes N] [--max-context N] [--max-tokens N] [--max-queue N]
                  [--shutdown-timeout-ms MS] [--ffn-down-layout units|features]
                  each also from the environment (MODEL_URL, LAYERS, THREADS, PORT, HOST, CACHE_DIR,
                  MAX_SESSIONS, MAX_KV_BYTES, MAX_CONTEXT, MAX_TOKENS, MAX_QUEUE, SHUTDOWN_TIMEOUT_MS,
                  FFN_DOWN_LAYOUT);
                  AUTH_TOKEN from the environment only; docs/http-api.md`;

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
      'cache-dir': { type: 'string' },
      ...APPROX_CLI_OPTIONS,
      json: { type: 'boolean', default: false },
    },
  },
  generate: {
    run: generate,
    options: {
      model: { type: 'string' },
      prompt: { type: 'string', default: 'The capital of France is' },
      chat: { type: 'boolean', default: false },
      'max-tokens': { type: 'string', default: '32' },
      temperature: { type: 'string', default: '0' },
      'top-k': { type: 'string', default: '40' },
      'top-p': { type: 'string', default: '0.95' },
      seed: { type: 'string', default: '1' },
      threads: { type: 'string' },
      nodes: { type: 'string' },
      build: { type: 'string' },
      'cache-dir': { type: 'string' },
      ...APPROX_CLI_OPTIONS,
      json: { type: 'boolean', default: false },
    },
  },
  'calibrate-exit': {
    run: calibrateExit,
    options: {
      model: { type: 'string' },
      corpus: { type: 'string' },
      agreement: { type: 'string', default: '0.99' },
      'exit-window': { type: 'string', default: '2' },
      positions: { type: 'string', default: '256' },
      threads: { type: 'string' },
      nodes: { type: 'string' },
      build: { type: 'string' },
      'cache-dir': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  },
  inspect: { run: inspect, options: { json: { type: 'boolean', default: false } } },
  plan: {
    run: plan,
    options: { nodes: { type: 'string' }, memory: { type: 'string' }, json: { type: 'boolean', default: false } },
  },
  serve: { run: serveCommand, options: SERVE_OPTIONS },
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

// A CLI owns its process: exit once the command is done rather than wait for every handle
// (pthread workers, llama.cpp's threads) to let go. stdout/stderr are synchronous on Linux.
process.exit(await main(process.argv.slice(2)));
