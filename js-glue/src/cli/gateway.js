// layerfold gateway: the OpenAI-compatible API over a pipeline of layer nodes (docs/gateway.md).
// Every option also comes from the environment, as for `serve`; a command-line option wins over
// its variable. SIGTERM and SIGINT (or, under npx, the end of npm's wrapper) drain the requests
// under way, then exit.
import path from 'node:path';

import { DEFAULT_REQUEST_TIMEOUT_MS } from '../gateway/app.js';
import { serveGateway } from '../gateway/host.js';
import { DEFAULT_IMAGE_FETCH_TIMEOUT_MS, DEFAULT_IMAGE_MAX_BYTES, DEFAULT_IMAGE_MAX_TOKENS } from '../generation/media.js';
import { DEFAULT_SPECULATIVE, speculativeOptions } from '../generation/prompt_lookup.js';
import { DEFAULT_CHECKPOINTS, MAX_CHECKPOINTS } from '../protocol/checkpoints.js';
import { DEFAULT_SEND_TIMEOUT_MS } from '../server/app.js';
import { startOtlpExport } from '../telemetry/otlp.js';
import { defaultModel } from './default_model.js';
import { ALLOW_UNVALIDATED_SOURCE, BUILD, CACHE_DIR, fromEnv, MODEL, PORT, THREADS, timeoutMs } from './options/shared.js';
import { stopRequested } from './stop_requested.js';

// The longest draft a cut can always take back, and the longest n-gram prompt lookup matches
// (generation/prompt_lookup.js).
const MAX_DRAFT = 64;
const MAX_NGRAM = 5;

export const GATEWAY_OPTIONS = fromEnv({
  model: { ...MODEL, env: 'MODEL_URL' },
  nodes: { kind: 'string', value: 'SPEC', help: 'the pipeline\'s nodes (SPEC below)', shown: 'one local node of every layer' },
  'model-id': { kind: 'string', value: 'NAME', help: 'the model name clients send', shown: 'the file\'s name without .gguf' },
  threads: THREADS,
  build: BUILD,
  port: { ...PORT, default: 8000 },
  host: { kind: 'string', value: 'H', help: 'the address to listen on', default: '127.0.0.1' },
  'cache-dir': CACHE_DIR,
  'max-queue': { kind: 'integer', min: 0, value: 'N', help: 'requests admitted besides one; beyond, 429', default: 16 },
  'max-cached-sessions': { kind: 'integer', min: 0, value: 'N', help: 'finished requests\' sessions kept for prefix reuse', default: 16 },
  'max-sessions': { kind: 'integer', min: 1, value: 'N', help: 'sessions a local node holds', default: 64 },
  'ctx-checkpoints': { kind: 'integer', min: 0, max: MAX_CHECKPOINTS, value: 'N', help: 'checkpoints a chat\'s session keeps on each node, one per turn (0: none)',
    default: DEFAULT_CHECKPOINTS },
  'request-timeout-ms': timeoutMs(1, 'a request\'s deadline', DEFAULT_REQUEST_TIMEOUT_MS),
  'send-timeout-ms': timeoutMs(1, 'how long a stream may wait for its client to read', DEFAULT_SEND_TIMEOUT_MS),
  'shutdown-timeout-ms': timeoutMs(0, 'how long a drain waits', 10_000),
  speculative: { kind: 'choice', choices: ['prompt-lookup', 'mtp', 'off'], value: 'MODE', help: 'decode with drafted tokens (docs/gateway.md)',
    default: DEFAULT_SPECULATIVE },
  'draft-model': { kind: 'string', value: 'PATH|URL', help: 'the MTP drafter (gemma4-assistant) the local last node loads, for --speculative mtp' },
  'draft-max': { kind: 'integer', min: 1, max: MAX_DRAFT, value: 'N', help: 'the most tokens drafted at once', default: 8 },
  'draft-min-ngram': { kind: 'integer', min: 1, max: MAX_NGRAM, value: 'N', help: 'the shortest recurring n-gram a draft is taken from', default: 3 },
  mmproj: { kind: 'string', value: 'PATH|URL', help: 'the model\'s projector: chats may hold images (docs/vision.md), and audio with an E2B or E4B projector (docs/audio.md)' },
  encoder: { kind: 'string', value: 'URL', help: 'an encoder node (serve --mmproj) that encodes the chats\' images and audio, instead of --mmproj here', env: 'ENCODER_URL' },
  'image-max-tokens': { kind: 'integer', min: 70, max: 1120, value: 'N', help: 'an image\'s soft-token budget; local nodes take spans of it',
    default: DEFAULT_IMAGE_MAX_TOKENS },
  'image-urls': { kind: 'boolean', help: 'fetch http(s) image URLs (else only data: URLs are read)' },
  'image-max-bytes': { kind: 'integer', min: 1, value: 'N', help: 'bytes of one image, sent or fetched', default: DEFAULT_IMAGE_MAX_BYTES },
  'image-fetch-timeout-ms': timeoutMs(1, 'how long an image URL may take to arrive', DEFAULT_IMAGE_FETCH_TIMEOUT_MS),
  'insecure-no-auth': { kind: 'boolean', help: 'serve without AUTH_TOKEN on a non-loopback host', env: 'LAYERFOLD_INSECURE_NO_AUTH' },
  'allow-unvalidated-source': ALLOW_UNVALIDATED_SOURCE,
});

/**
 * The serveGateway() options from the options read (options/read_options.js, the environment
 * included; model: the built-in default model when neither names one); the tokens from the
 * environment only.
 * @example await gatewayConfig(readOptions(GATEWAY_OPTIONS, { nodes: 'local:0-1' }, env), env)
 */
export async function gatewayConfig(values, env) {
  if (values.mmproj !== undefined && values.encoder !== undefined) {
    throw new Error('--mmproj and --encoder (ENCODER_URL) are exclusive: the projector is read here or an encoder node encodes with it, not both');
  }
  const model = values.model ?? await defaultModel();
  return {
    model,
    nodes: values.nodes,
    // The name clients send as "model": the file's name without .gguf unless given.
    modelId: values['model-id'] ?? path.basename(new URL(model, 'file:///').pathname).replace(/\.gguf$/i, ''),
    threads: values.threads,
    build: values.build,
    port: values.port,
    host: values.host,
    cacheDir: values['cache-dir'],
    maxQueue: values['max-queue'],
    maxCachedSessions: values['max-cached-sessions'],
    maxSessions: values['max-sessions'],
    checkpoints: values['ctx-checkpoints'],
    requestTimeoutMs: values['request-timeout-ms'],
    sendTimeoutMs: values['send-timeout-ms'],
    shutdownTimeoutMs: values['shutdown-timeout-ms'],
    speculative: speculativeOptions({ mode: values.speculative, maxDraft: values['draft-max'], minNgram: values['draft-min-ngram'] },
      (name) => `--${name}`),
    draftModel: values['draft-model'],
    images: values.mmproj === undefined && values.encoder === undefined ? undefined : {
      mmproj: values.mmproj, encoder: values.encoder, maxTokens: values['image-max-tokens'], fetchUrls: values['image-urls'] === true,
      maxBytes: values['image-max-bytes'], fetchTimeoutMs: values['image-fetch-timeout-ms'],
    },
    // Tokens from the environment only: a command line shows in `ps`. AUTH_TOKEN is what clients
    // send as their API key; remote layer nodes get NODES_AUTH_TOKEN, and only it: a node never
    // sees the key clients hold, so one leaked credential does not open the other door.
    authToken: env.AUTH_TOKEN,
    nodesAuthToken: env.NODES_AUTH_TOKEN,
    insecureNoAuth: values['insecure-no-auth'],
    allowUnvalidatedSource: values['allow-unvalidated-source'],
  };
}

/**
 * Runs until SIGTERM/SIGINT or npm's wrapper ends (stop_requested.js: exit 0 after the drain) or a
 * pipeline that failed to open (exit 1).
 */
export async function gatewayCommand(values) {
  const config = await gatewayConfig(values, process.env);
  const defined = Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined));
  const telemetry = await startOtlpExport(process.env, 'layerfold-gateway');
  const gateway = await serveGateway(defined);
  const outcome = await new Promise((resolve) => {
    stopRequested().then(resolve);
    gateway.opened.catch(() => resolve('open failed'));
  });
  await gateway.shutdown();
  await telemetry?.shutdown();
  return outcome === 'open failed' ? 1 : 0;
}
