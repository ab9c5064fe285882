// layerfold serve: one layer node over HTTP (the Cloud Run container's entrypoint). Every option
// also comes from the environment, the way Cloud Run passes configuration (PORT among them);
// a command-line option wins over its variable. SIGTERM and SIGINT (or, under npx, the end of
// npm's wrapper) shut down gracefully.
import { layerRange } from '../pipeline/nodes_spec.js';
import { serve } from '../server/node_host.js';
import { stopRequested } from './stop_requested.js';

// option name -> environment variable
const ENV = {
  model: 'MODEL_URL', layers: 'LAYERS', threads: 'THREADS', port: 'PORT', host: 'HOST', 'cache-dir': 'CACHE_DIR',
  'max-sessions': 'MAX_SESSIONS', 'max-kv-bytes': 'MAX_KV_BYTES', 'max-context': 'MAX_CONTEXT', 'max-tokens': 'MAX_TOKENS',
  'max-queue': 'MAX_QUEUE', 'max-batch-rows': 'MAX_BATCH_ROWS', 'max-logits-bytes': 'MAX_LOGITS_BYTES', 'body-timeout-ms': 'BODY_TIMEOUT_MS',
  'send-timeout-ms': 'SEND_TIMEOUT_MS', 'shutdown-timeout-ms': 'SHUTDOWN_TIMEOUT_MS', 'ffn-down-layout': 'FFN_DOWN_LAYOUT',
  'per-layer-row-cache-bytes': 'PER_LAYER_ROW_CACHE_BYTES',
};
export const SERVE_OPTIONS = {
  ...Object.fromEntries(Object.keys(ENV).map((name) => [name, { type: 'string' }])),
  'insecure-no-auth': { type: 'boolean' },
  'allow-unvalidated-source': { type: 'boolean' },
};

/**
 * A boolean option: its flag, or its variable set to 1 (0 or unset: false; anything else an error).
 * @example envFlag(values['insecure-no-auth'], process.env, 'LAYERFOLD_INSECURE_NO_AUTH')
 */
export function envFlag(flagValue, env, variable) {
  if (flagValue) return true;
  const raw = env[variable];
  if (raw === undefined || raw === '' || raw === '0') return false;
  if (raw === '1') return true;
  throw new Error(`${variable}=${JSON.stringify(raw)}: expected 1 (or 0, or unset)`);
}

// --insecure-no-auth, or LAYERFOLD_INSECURE_NO_AUTH=1: serve without a token on a non-loopback host.
export const insecureNoAuth = (flagValue, env) => envFlag(flagValue, env, 'LAYERFOLD_INSECURE_NO_AUTH');

// --allow-unvalidated-source, or LAYERFOLD_ALLOW_UNVALIDATED_SOURCE=1: load from a server that sends
// neither ETag nor Last-Modified (sources/unvalidated.js).
export const allowUnvalidatedSource = (flagValue, env) => envFlag(flagValue, env, 'LAYERFOLD_ALLOW_UNVALIDATED_SOURCE');

/** An integer option ≥ min from its text (undefined stays undefined), or an error naming the option and its variable. */
export function integer(text, name, min, env = ENV) {
  if (text === undefined) return undefined;
  const value = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value) || value < min) throw new Error(`--${name} / ${env[name]}: "${text}" is not an integer ≥ ${min}`);
  return value;
}

// units (default) or features: how ffn_down is laid out (docs/approximate.md, top-K gate FFN).
function ffnDownLayout(text) {
  if (text === undefined || text === 'units' || text === 'features') return text;
  throw new Error(`--ffn-down-layout / FFN_DOWN_LAYOUT: "${text}" is not units or features`);
}

// --layers / LAYERS -> [first, last + 1), or an error naming both.
function layers(text) {
  const range = layerRange(text);
  if (!range) throw new Error(`--layers / LAYERS: "${text}" is not FIRST-LAST (inclusive, e.g. 0-5)`);
  return range;
}

/**
 * The serve() options from command-line values and the environment.
 * @example serveConfig({ model: 'tiny.gguf' }, { LAYERS: '0-1', PORT: '8080' })
 */
export function serveConfig(values, env) {
  const get = (name) => values[name] ?? (env[ENV[name]] || undefined);
  const model = get('model');
  if (!model) throw new Error('serve needs --model URL (or MODEL_URL)');
  const range = get('layers');
  return {
    model,
    layers: range === undefined ? undefined : layers(range),
    threads: integer(get('threads'), 'threads', 1),
    port: integer(get('port'), 'port', 0) ?? 8080,
    host: get('host') ?? '0.0.0.0',
    cacheDir: get('cache-dir'),
    maxSessions: integer(get('max-sessions'), 'max-sessions', 1),
    maxKvBytes: integer(get('max-kv-bytes'), 'max-kv-bytes', 1),
    maxContext: integer(get('max-context'), 'max-context', 1),
    maxTokens: integer(get('max-tokens'), 'max-tokens', 1),
    maxQueue: integer(get('max-queue'), 'max-queue', 0),
    maxBatchRows: integer(get('max-batch-rows'), 'max-batch-rows', 1),
    maxLogitsBytes: integer(get('max-logits-bytes'), 'max-logits-bytes', 4),
    bodyTimeoutMs: integer(get('body-timeout-ms'), 'body-timeout-ms', 1),
    sendTimeoutMs: integer(get('send-timeout-ms'), 'send-timeout-ms', 1),
    shutdownTimeoutMs: integer(get('shutdown-timeout-ms'), 'shutdown-timeout-ms', 0),
    ffnDownLayout: ffnDownLayout(get('ffn-down-layout')),
    perLayerRowCacheBytes: integer(get('per-layer-row-cache-bytes'), 'per-layer-row-cache-bytes', 0),
    // The token comes from the environment only: a command line shows in `ps`. Set but empty is
    // kept as '' so that serve() refuses it rather than serve open.
    authToken: env.AUTH_TOKEN,
    insecureNoAuth: insecureNoAuth(values['insecure-no-auth'], env),
    allowUnvalidatedSource: allowUnvalidatedSource(values['allow-unvalidated-source'], env),
  };
}

/**
 * Runs until SIGTERM/SIGINT or the end of npm's wrapper (stop_requested.js: exit 0 after the
 * graceful shutdown; the log counts any request cut at the deadline) or a failed load (exit 1,
 * so the platform restarts the instance).
 */
export async function serveCommand(values) {
  const config = serveConfig(values, process.env);
  const defined = Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined));
  const node = await serve(defined);
  const outcome = await new Promise((resolve) => {
    stopRequested().then(resolve);
    node.loaded.catch(() => resolve('load failed'));
  });
  if (outcome === 'load failed') return 1;
  await node.shutdown();
  return 0;
}
