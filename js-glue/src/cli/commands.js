// The CLI's commands: each one's options (node:util parseArgs specs), usage text and entry point,
// listed once for the dispatcher (cli/main.js) and the help it prints.
import { APPROX_CLI_OPTIONS, APPROX_USAGE } from './approx.js';
import { calibrateExit } from './calibrate_exit.js';
import { GATEWAY_OPTIONS, gatewayCommand } from './gateway.js';
import { generate } from './generate.js';
import { inspect } from './inspect.js';
import { plan } from './plan.js';
import { pull } from './pull.js';
import { SERVE_OPTIONS, serveCommand } from './serve.js';
import { validate } from './validate.js';

const MODEL_NOTE = `  MODEL / PATH: a local path, or an http(s)://, s3://, r2:// or hf://OWNER/REPO/FILE[@REVISION] URL (cached
        under --cache-dir; hf:// from HF_ENDPOINT, default https://huggingface.co, with HF_TOKEN); a server
        sending neither ETag nor Last-Modified is refused unless --allow-unvalidated-source
        (or LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1): docs/http-api.md, "Model sources"`;
const NODES_NOTE = `  SPEC: nodes in pipeline order, "local:0-29" (layers run here) or "http://HOST:PORT" (a layer node,
        see serve; bearer token from AUTH_TOKEN), e.g. local:0-29,http://10.0.0.7:8080`;

// Options every pipeline command takes.
const PIPELINE_OPTIONS = {
  threads: { type: 'string' },
  nodes: { type: 'string' },
  build: { type: 'string' },
  'cache-dir': { type: 'string' },
  'allow-unvalidated-source': { type: 'boolean' },
  json: { type: 'boolean', default: false },
};

export const COMMANDS = {
  validate: {
    run: validate,
    options: {
      model: { type: 'string' },
      prompt: { type: 'string', default: 'The capital of France is' },
      expect: { type: 'string', default: ' Paris' },
      'top-k': { type: 'string', default: '5' },
      ...PIPELINE_OPTIONS,
      ...APPROX_CLI_OPTIONS,
    },
    usage: `  layerfold validate [--model PATH] [--prompt TEXT] [--expect TEXT] [--top-k N] [--threads N]
                     [--nodes SPEC] [--build threaded|single] [--cache-dir DIR] [--json]`,
    notes: [MODEL_NOTE, APPROX_USAGE, NODES_NOTE],
  },
  generate: {
    run: generate,
    options: {
      model: { type: 'string' },
      // No default here: the default prompt is only for a run given neither option (generate.js).
      prompt: { type: 'string', multiple: true },
      'prompt-file': { type: 'string' },
      chat: { type: 'boolean', default: false },
      'max-tokens': { type: 'string', default: '32' },
      temperature: { type: 'string', default: '0' },
      'top-k': { type: 'string', default: '40' },
      'top-p': { type: 'string', default: '0.95' },
      seed: { type: 'string', default: '1' },
      ...PIPELINE_OPTIONS,
      ...APPROX_CLI_OPTIONS,
    },
    usage: `  layerfold generate [--model PATH] [--prompt TEXT]... [--prompt-file FILE] [--chat] [--max-tokens N]
                     [--temperature T] [--top-k K] [--top-p P] [--seed S] [--threads N] [--nodes SPEC] [--json]
                     several prompts (--prompt repeated, FILE's lines) generate concurrently, printed in
                     order with each one's time per token and the tokens/s of all together`,
    notes: [MODEL_NOTE, APPROX_USAGE, NODES_NOTE],
  },
  'calibrate-exit': {
    run: calibrateExit,
    options: {
      model: { type: 'string' },
      corpus: { type: 'string' },
      agreement: { type: 'string', default: '0.99' },
      'exit-window': { type: 'string', default: '2' },
      positions: { type: 'string', default: '256' },
      ...PIPELINE_OPTIONS,
    },
    usage: `  layerfold calibrate-exit --model PATH --corpus FILE [--agreement 0.99] [--exit-window 2] [--positions 256]
                           [--threads N] [--nodes SPEC] [--build threaded|single] [--json]`,
    notes: [MODEL_NOTE, NODES_NOTE],
  },
  inspect: {
    run: inspect,
    options: { json: { type: 'boolean', default: false }, 'allow-unvalidated-source': { type: 'boolean' } },
    usage: '  layerfold inspect MODEL [--json] [--allow-unvalidated-source]',
    notes: [MODEL_NOTE],
  },
  plan: {
    run: plan,
    options: { nodes: { type: 'string' }, memory: { type: 'string' }, 'per-layer-row-cache': { type: 'string' },
      'max-context': { type: 'string' }, 'max-tokens': { type: 'string' }, json: { type: 'boolean', default: false },
      'allow-unvalidated-source': { type: 'boolean' } },
    usage: '  layerfold plan MODEL --nodes K [--memory BYTES|128MiB] [--max-context N [--max-tokens N]] [--per-layer-row-cache BYTES|8MiB] [--json]\n                 [--allow-unvalidated-source]',
    notes: [MODEL_NOTE, '  --per-layer-row-cache: E2B/E4B: the first node\'s cache of per_layer_token_embd rows, counted instead of the table (default 8MiB)',
      '  --max-context: count each node\'s whole memory as its budget check does (one session at N positions, 0: the model\'s; a forward of --max-tokens rows, default 512), not its weights alone'],
  },
  pull: {
    run: pull,
    options: { 'cache-dir': { type: 'string' }, json: { type: 'boolean', default: false }, 'allow-unvalidated-source': { type: 'boolean' } },
    usage: `  layerfold pull URL [--cache-dir DIR] [--json] [--allow-unvalidated-source]
                 the whole file into the cache the other commands read URL through (default: the layerfold
                 cache's), with a progress bar; a pull cut short continues where it stopped`,
    notes: [MODEL_NOTE],
  },
  serve: {
    run: serveCommand,
    options: SERVE_OPTIONS,
    usage: `  layerfold serve --model URL [--layers A-B] [--threads N] [--port P] [--host H] [--cache-dir DIR]
                  [--max-sessions N] [--max-kv-bytes N] [--max-context N] [--max-tokens N] [--max-queue N]
                  [--max-batch-rows N] [--max-logits-bytes N] [--body-timeout-ms MS] [--send-timeout-ms MS]
                  [--shutdown-timeout-ms MS] [--ffn-down-layout units|features] [--per-layer-row-cache-bytes N]
                  [--insecure-no-auth] [--allow-unvalidated-source]
                  each also from the environment (MODEL_URL, LAYERS, THREADS, PORT, HOST, CACHE_DIR,
                  MAX_SESSIONS, MAX_KV_BYTES, MAX_CONTEXT, MAX_TOKENS, MAX_QUEUE, MAX_BATCH_ROWS, MAX_LOGITS_BYTES,
                  BODY_TIMEOUT_MS, SEND_TIMEOUT_MS, SHUTDOWN_TIMEOUT_MS, FFN_DOWN_LAYOUT,
                  PER_LAYER_ROW_CACHE_BYTES, LAYERFOLD_INSECURE_NO_AUTH=1, LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1);
                  AUTH_TOKEN from the environment only: without it, serve binds a loopback --host only,
                  unless --insecure-no-auth; docs/http-api.md`,
    notes: [],
  },
  gateway: {
    run: gatewayCommand,
    options: GATEWAY_OPTIONS,
    usage: `  layerfold gateway [--model PATH] [--nodes SPEC] [--model-id NAME] [--port P] [--host H] [--threads N]
                    [--build threaded|single] [--cache-dir DIR] [--max-queue N] [--max-cached-sessions N]
                    [--max-sessions N] [--request-timeout-ms MS] [--send-timeout-ms MS]
                    [--shutdown-timeout-ms MS] [--speculative prompt-lookup|off] [--draft-max N]
                    [--draft-min-ngram N] [--insecure-no-auth] [--allow-unvalidated-source]
                    the OpenAI API (/v1/models, /v1/completions, /v1/chat/completions) over the pipeline;
                    each option also from the environment (MODEL_URL, NODES, MODEL_ID, PORT, HOST, THREADS,
                    BUILD, CACHE_DIR, MAX_QUEUE, MAX_CACHED_SESSIONS, MAX_SESSIONS, REQUEST_TIMEOUT_MS,
                    SEND_TIMEOUT_MS, SHUTDOWN_TIMEOUT_MS, SPECULATIVE, DRAFT_MAX, DRAFT_MIN_NGRAM,
                    LAYERFOLD_INSECURE_NO_AUTH=1, LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1); AUTH_TOKEN (the
                    clients' API key) and NODES_AUTH_TOKEN (remote nodes', never AUTH_TOKEN) from the
                    environment only; default --host 127.0.0.1 --port 8000; docs/gateway.md`,
    notes: [MODEL_NOTE, NODES_NOTE],
  },
};

/**
 * The help text of one command (its usage and the notes it refers to), or of every command.
 * @example console.log(usage('inspect')) // "usage:\n  layerfold inspect MODEL [--json]\n  MODEL / PATH: ..."
 */
export function usage(name) {
  const commands = name ? [COMMANDS[name]] : Object.values(COMMANDS);
  const notes = [...new Set(commands.flatMap((c) => c.notes))];
  const help = name ? '' : '\n  layerfold COMMAND --help: one command\'s usage';
  return `usage:\n${[...commands.map((c) => c.usage), ...notes].join('\n')}${help}`;
}
