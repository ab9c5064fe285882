// The CLI's commands: each one's synopsis, options (a schema: options/read_options.js), how
// many arguments besides them it takes (the MODEL of inspect and plan), notes and entry point,
// listed once for the dispatcher (cli/main.js) and the help it prints. A command with
// ownArguments (make-model) is handed its arguments as they are, and checks them itself.
import { calibrateExit, CALIBRATE_EXIT_OPTIONS } from './calibrate_exit.js';
import { chat, CHAT_OPTIONS } from './chat.js';
import { GATEWAY_OPTIONS, gatewayCommand } from './gateway.js';
import { generate, GENERATE_OPTIONS } from './generate.js';
import { inspect, INSPECT_OPTIONS } from './inspect.js';
import { makeModel } from './make_model.js';
import { optionsHelp } from './options/help.js';
import { plan, PLAN_OPTIONS } from './plan.js';
import { pull, PULL_OPTIONS } from './pull.js';
import { serveCommand, SERVE_OPTIONS } from './serve.js';
import { validate, VALIDATE_OPTIONS } from './validate.js';

const MODEL_NOTE = `  MODEL / PATH: a local path, or an http(s)://, s3://, r2:// or hf://OWNER/REPO/FILE[@REVISION] URL (cached
        under --cache-dir; hf:// from HF_ENDPOINT, default https://huggingface.co, with HF_TOKEN); a server
        sending neither ETag nor Last-Modified is refused unless --allow-unvalidated-source
        (or LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1): docs/http-api.md, "Model sources"`;
const NODES_NOTE = `  SPEC: nodes in pipeline order, "local:0-29" (layers run here) or "http://HOST:PORT" (a layer node,
        see serve; bearer token from AUTH_TOKEN), e.g. local:0-29,http://10.0.0.7:8080`;
const APPROX_NOTE = '  approximate modes: each off by default, docs/approximate.md';
const ENV_NOTE = '  each option also from its variable (env), the option winning';
const SERVE_AUTH_NOTE = `  AUTH_TOKEN from the environment only: without it, serve binds a loopback --host only, unless
        --insecure-no-auth`;
const GATEWAY_AUTH_NOTE = `  AUTH_TOKEN (the clients' API key) and NODES_AUTH_TOKEN (remote nodes', never AUTH_TOKEN) from the
        environment only; without AUTH_TOKEN, the gateway binds a loopback --host only, unless --insecure-no-auth`;
// --help, which every command takes besides its own options (cli/main.js).
const HELP = { help: { kind: 'boolean', help: 'this help (also -h)' } };

export const COMMANDS = {
  validate: {
    run: validate,
    synopsis: 'layerfold validate [options]',
    summary: 'the next-token top-k of a prompt through the pipeline, with timings and llama.cpp\'s agreement',
    options: VALIDATE_OPTIONS,
    notes: [MODEL_NOTE, NODES_NOTE, APPROX_NOTE],
  },
  generate: {
    run: generate,
    synopsis: 'layerfold generate [options]',
    summary: 'continuations of prompts, greedy or sampled (several prompts at once, printed in order with their timings)',
    options: GENERATE_OPTIONS,
    notes: [MODEL_NOTE, NODES_NOTE, APPROX_NOTE],
  },
  chat: {
    run: chat,
    synopsis: 'layerfold chat [options]',
    summary: 'an interactive chat in the terminal with the model\'s chat template, each reply streamed, the conversation\'s session kept from turn to turn (/help inside)',
    options: CHAT_OPTIONS,
    notes: [MODEL_NOTE, NODES_NOTE],
  },
  'calibrate-exit': {
    run: calibrateExit,
    synopsis: 'layerfold calibrate-exit --model PATH --corpus FILE [options]',
    summary: 'the early-exit threshold that keeps a top-1 agreement on a corpus',
    options: CALIBRATE_EXIT_OPTIONS,
    notes: [MODEL_NOTE, NODES_NOTE],
  },
  inspect: {
    run: inspect,
    positionals: 1,
    synopsis: 'layerfold inspect MODEL [options]',
    summary: 'the model as the engine reads it, and what a node loads for each layer',
    options: INSPECT_OPTIONS,
    notes: [MODEL_NOTE],
  },
  plan: {
    run: plan,
    positionals: 1,
    synopsis: 'layerfold plan MODEL --nodes K [options]',
    summary: 'balanced contiguous layer ranges for K nodes within a memory budget',
    options: PLAN_OPTIONS,
    notes: [MODEL_NOTE],
  },
  'make-model': {
    run: makeModel,
    ownArguments: true,
    options: {},
    synopsis: 'layerfold make-model --preset NAME --out FILE [overrides]',
    summary: 'a synthetic GGUF of a model\'s real architecture and shapes (the presets: --list-presets; the options: --help)',
  },
  pull: {
    run: pull,
    positionals: 1,
    synopsis: 'layerfold pull URL [options]',
    summary: 'the whole file into the cache the other commands read URL through, with a progress bar; a pull cut short continues where it stopped',
    options: PULL_OPTIONS,
    notes: [MODEL_NOTE],
  },
  serve: {
    run: serveCommand,
    synopsis: 'layerfold serve --model URL [options]',
    summary: 'one layer node over HTTP (docs/http-api.md)',
    options: SERVE_OPTIONS,
    notes: [ENV_NOTE, SERVE_AUTH_NOTE],
  },
  gateway: {
    run: gatewayCommand,
    synopsis: 'layerfold gateway [options]',
    summary: 'the OpenAI API (/v1/models, /v1/completions, /v1/chat/completions) over the pipeline (docs/gateway.md)',
    options: GATEWAY_OPTIONS,
    notes: [ENV_NOTE, GATEWAY_AUTH_NOTE, MODEL_NOTE, NODES_NOTE],
  },
};

/**
 * The help text of one command (its synopsis, options with their defaults, and the notes they
 * refer to), or the list of every command.
 * @example console.log(usage('inspect')) // "usage:\n  layerfold inspect MODEL [options]\n  ..."
 */
export function usage(name) {
  if (!name) {
    const lines = Object.values(COMMANDS).map((c) => `  ${c.synopsis}\n      ${c.summary}`);
    return `usage:\n${lines.join('\n')}\n  layerfold COMMAND --help: the command's options and their defaults\n  layerfold --version`;
  }
  const command = COMMANDS[name];
  return `usage:\n  ${command.synopsis}\n    ${command.summary}\noptions:\n${optionsHelp({ ...command.options, ...HELP })}\n` +
    command.notes.join('\n');
}
