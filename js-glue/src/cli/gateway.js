// layerfold gateway: the OpenAI-compatible API over a pipeline of layer nodes (docs/gateway.md).
// Every option also comes from the environment, as for `serve`; a command-line option wins over
// its variable. SIGTERM and SIGINT (or, under npx, the end of npm's wrapper) drain the requests
// under way, then exit.
import path from 'node:path';

import { serveGateway } from '../gateway/host.js';
import { speculativeOptions } from '../gateway/prompt_lookup.js';
import { defaultModel } from './default_model.js';
import { allowUnvalidatedSource, insecureNoAuth, integer } from './serve.js';
import { stopRequested } from './stop_requested.js';

// option name -> environment variable
export const GATEWAY_ENV = {
  model: 'MODEL_URL', nodes: 'NODES', 'model-id': 'MODEL_ID', threads: 'THREADS', build: 'BUILD', port: 'PORT', host: 'HOST', 'cache-dir': 'CACHE_DIR',
  'max-queue': 'MAX_QUEUE', 'max-cached-sessions': 'MAX_CACHED_SESSIONS', 'max-sessions': 'MAX_SESSIONS', 'request-timeout-ms': 'REQUEST_TIMEOUT_MS',
  'send-timeout-ms': 'SEND_TIMEOUT_MS', 'shutdown-timeout-ms': 'SHUTDOWN_TIMEOUT_MS',
  speculative: 'SPECULATIVE', 'draft-max': 'DRAFT_MAX', 'draft-min-ngram': 'DRAFT_MIN_NGRAM',
};


export const GATEWAY_OPTIONS = {
  ...Object.fromEntries(Object.keys(GATEWAY_ENV).map((name) => [name, { type: 'string' }])),
  'insecure-no-auth': { type: 'boolean' },
  'allow-unvalidated-source': { type: 'boolean' },
};

/**
 * The serveGateway() options from command-line values and the environment (model: the built-in
 * default model when neither names one).
 * @example await gatewayConfig({ nodes: 'local:0-1' }, { PORT: '8000' })
 */
export async function gatewayConfig(values, env) {
  const get = (name) => values[name] ?? (env[GATEWAY_ENV[name]] || undefined);
  const int = (name, min) => integer(get(name), name, min, GATEWAY_ENV);
  const model = get('model') ?? await defaultModel();
  const build = get('build');
  if (build !== undefined && build !== 'threaded' && build !== 'single') throw new Error(`--build / BUILD: "${build}" is not threaded or single`);
  return {
    model,
    nodes: get('nodes'),
    // The name clients send as "model": the file's name without .gguf unless given.
    modelId: get('model-id') ?? path.basename(new URL(model, 'file:///').pathname).replace(/\.gguf$/i, ''),
    threads: int('threads', 1),
    build,
    port: int('port', 0) ?? 8000,
    host: get('host') ?? '127.0.0.1',
    cacheDir: get('cache-dir'),
    maxQueue: int('max-queue', 0),
    maxCachedSessions: int('max-cached-sessions', 0),
    maxSessions: int('max-sessions', 1),
    requestTimeoutMs: int('request-timeout-ms', 1),
    sendTimeoutMs: int('send-timeout-ms', 1),
    shutdownTimeoutMs: int('shutdown-timeout-ms', 0),
    speculative: speculativeOptions({ mode: get('speculative'), maxDraft: int('draft-max', 1), minNgram: int('draft-min-ngram', 1) },
      (name) => `--${name} / ${GATEWAY_ENV[name]}`),
    // Tokens from the environment only: a command line shows in `ps`. AUTH_TOKEN is what clients
    // send as their API key; remote layer nodes get NODES_AUTH_TOKEN, and only it: a node never
    // sees the key clients hold, so one leaked credential does not open the other door.
    authToken: env.AUTH_TOKEN,
    nodesAuthToken: env.NODES_AUTH_TOKEN,
    insecureNoAuth: insecureNoAuth(values['insecure-no-auth'], env),
    allowUnvalidatedSource: allowUnvalidatedSource(values['allow-unvalidated-source'], env),
  };
}

/**
 * Runs until SIGTERM/SIGINT or npm's wrapper ends (stop_requested.js: exit 0 after the drain) or a
 * pipeline that failed to open (exit 1).
 */
export async function gatewayCommand(values) {
  const config = await gatewayConfig(values, process.env);
  const defined = Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined));
  const gateway = await serveGateway(defined);
  const outcome = await new Promise((resolve) => {
    stopRequested().then(resolve);
    gateway.opened.catch(() => resolve('open failed'));
  });
  await gateway.shutdown();
  return outcome === 'open failed' ? 1 : 0;
}
