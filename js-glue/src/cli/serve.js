// layerfold serve: one layer node over HTTP (the Cloud Run container's entrypoint). Every option
// also comes from the environment, the way Cloud Run passes configuration (PORT among them);
// a command-line option wins over its variable. SIGTERM and SIGINT (or, under npx, the end of
// npm's wrapper) shut down gracefully.
import { ALLOW_UNVALIDATED_SOURCE, CACHE_DIR, CACHE_TYPE_K, CACHE_TYPE_V, DOT_FORM, fromEnv, MAX_SPAN, PORT, THREADS, timeoutMs } from './options/shared.js';
import { DEFAULT_ROW_CACHE_BYTES } from '../node/per_layer_rows.js';
import { layerRange, memberShard } from '../pipeline/nodes_spec.js';
import { DEFAULT_BODY_TIMEOUT_MS, DEFAULT_SEND_TIMEOUT_MS } from '../server/app.js';
import { DEFAULT_MAX_LOGITS_BYTES } from '../server/logits_answer.js';
import { serveMember } from '../server/member_host.js';
import { openNodeEncoder } from '../generation/node_encoder.js';
import { serve } from '../server/node_host.js';
import { startOtlpExport } from '../telemetry/otlp.js';
import { stopRequested } from './stop_requested.js';

export const SERVE_OPTIONS = fromEnv({
  model: { kind: 'string', value: 'URL', help: 'the GGUF, a path or an http(s)://, s3:// or r2:// URL (required)', env: 'MODEL_URL' },
  layers: { kind: 'string', value: 'A-B', help: 'the layers this node serves, inclusive', shown: 'every layer' },
  threads: THREADS,
  port: { ...PORT, default: 8080 },
  host: { kind: 'string', value: 'H', help: 'the address to listen on', default: '0.0.0.0' },
  'cache-dir': CACHE_DIR,
  'max-sessions': { kind: 'integer', min: 1, value: 'N', help: 'sessions held (least recently used evicted beyond)', default: 64 },
  'max-kv-bytes': { kind: 'integer', min: 1, value: 'N', help: 'bytes of the sessions\' KV caches (least recently used evicted beyond)', shown: 'no cap' },
  'max-context': { kind: 'integer', min: 1, value: 'N', help: 'positions of a session', shown: 'the model\'s n_ctx_train' },
  'max-tokens': { kind: 'integer', min: 1, value: 'N', help: 'rows of one request', default: 2048 },
  'max-queue': { kind: 'integer', min: 0, value: 'N', help: 'requests admitted besides those running; beyond, 429', default: 16 },
  'max-batch-rows': { kind: 'integer', min: 1, value: 'N', help: 'rows of one engine step', shown: '512, the rows a forward is sized for' },
  'max-logits-bytes': { kind: 'integer', min: 4, value: 'N', help: 'bytes of one logits answer', default: DEFAULT_MAX_LOGITS_BYTES },
  'body-timeout-ms': timeoutMs(1, 'how long a request body may take to arrive', DEFAULT_BODY_TIMEOUT_MS),
  'send-timeout-ms': timeoutMs(1, 'how long an answer may wait for its client to read', DEFAULT_SEND_TIMEOUT_MS),
  'shutdown-timeout-ms': timeoutMs(0, 'how long a shutdown waits for the requests under way', 10_000),
  'cache-type-k': CACHE_TYPE_K,
  'cache-type-v': CACHE_TYPE_V,
  'max-span': MAX_SPAN,
  'dot-form': DOT_FORM,
  'ffn-down-layout': { kind: 'choice', choices: ['units', 'features'], value: 'L', help: 'how ffn_down is laid out (docs/approximate.md)', default: 'units' },
  'per-layer-row-cache-bytes': { kind: 'integer', min: 0, value: 'N', help: 'E2B/E4B: the first node\'s cache of per-layer embedding rows',
    default: DEFAULT_ROW_CACHE_BYTES },
  'insecure-no-auth': { kind: 'boolean', help: 'serve without AUTH_TOKEN on a non-loopback host', env: 'LAYERFOLD_INSECURE_NO_AUTH' },
  'allow-unvalidated-source': ALLOW_UNVALIDATED_SOURCE,
  'draft-model': { kind: 'string', value: 'PATH|URL', help: 'the node serving the last layer: the MTP drafter (gemma4-assistant) beside its head (docs/gateway.md)' },
  mmproj: { kind: 'string', value: 'PATH|URL', help: 'the model\'s projector: the node also encodes images and audio for a gateway --encoder (docs/http-api.md)' },
  shard: { kind: 'string', value: 'I/S', help: 'serve member I (0-based) of a tensor-parallel group of S over --layers, for --nodes tp(...) (docs/tensor-parallel.md)' },
  ends: { kind: 'boolean', help: 'with --shard: also hold a vocabulary slice of the model\'s ends --layers touches (the embedding from layer 0, the head to the last), for a group at a pipeline\'s end' },
});

// --shard / SHARD -> [index, members], or an error naming it.
function shard(text) {
  const value = memberShard(text);
  if (!value) throw new Error(`--shard / SHARD must be I/S, member I (0-based) of a group of S >= 1, got ${JSON.stringify(text)}`);
  return value;
}

// --layers / LAYERS -> [first, last + 1), or an error naming it.
function layers(text) {
  const range = layerRange(text);
  if (!range) throw new Error(`--layers / LAYERS must be FIRST-LAST (inclusive, e.g. 0-5), got ${JSON.stringify(text)}`);
  return range;
}

/**
 * The serve() options from the options read (options/read_options.js, the environment included);
 * the bearer token from the environment only.
 * @example serveConfig(readOptions(SERVE_OPTIONS, { model: 'tiny.gguf' }, env), env)
 */
export function serveConfig(values, env) {
  if (!values.model) throw new Error('serve needs --model URL (or MODEL_URL)');
  return {
    model: values.model,
    layers: values.layers === undefined ? undefined : layers(values.layers),
    threads: values.threads,
    port: values.port,
    host: values.host,
    cacheDir: values['cache-dir'],
    maxSessions: values['max-sessions'],
    maxKvBytes: values['max-kv-bytes'],
    maxContext: values['max-context'],
    maxTokens: values['max-tokens'],
    maxQueue: values['max-queue'],
    maxBatchRows: values['max-batch-rows'],
    maxLogitsBytes: values['max-logits-bytes'],
    bodyTimeoutMs: values['body-timeout-ms'],
    sendTimeoutMs: values['send-timeout-ms'],
    shutdownTimeoutMs: values['shutdown-timeout-ms'],
    ffnDownLayout: values['ffn-down-layout'],
    cacheTypeK: values['cache-type-k'],
    cacheTypeV: values['cache-type-v'],
    maxSpan: values['max-span'],
    dotForm: values['dot-form'],
    perLayerRowCacheBytes: values['per-layer-row-cache-bytes'],
    // The token comes from the environment only: a command line shows in `ps`. Set but empty is
    // kept as '' so that serve() refuses it rather than serve open.
    authToken: env.AUTH_TOKEN,
    insecureNoAuth: values['insecure-no-auth'],
    allowUnvalidatedSource: values['allow-unvalidated-source'],
    draftModel: values['draft-model'],
    mmproj: values.mmproj,
    shard: values.shard === undefined ? undefined : shard(values.shard),
    ends: values.ends,
  };
}

// A group member's serveMember() options from serve's: those a member has, the others refused.
function memberConfig({ shard: memberShard, model, layers: range, threads, port, host, cacheDir, maxContext, cacheTypeK, cacheTypeV, dotForm, authToken,
  insecureNoAuth, draftModel, maxSpan, ends, mmproj }) {
  if (draftModel !== undefined) throw new Error('--draft-model goes on the node holding the head, not on a group member (--shard)');
  if (mmproj !== undefined) throw new Error('--mmproj is for a node: a group member (--shard) encodes no media');
  if (maxSpan > 0) throw new Error('--max-span is for a node: a group member (--shard) takes no media span');
  return { model, layers: range, shard: memberShard, threads, port, host, cacheDir, maxContext, cacheTypeK, cacheTypeV, dotForm, authToken, insecureNoAuth, ends };
}

/**
 * Runs until SIGTERM/SIGINT or the end of npm's wrapper (stop_requested.js: exit 0 after the
 * graceful shutdown; the log counts any request cut at the deadline) or a failed load (exit 1,
 * so the platform restarts the instance).
 */
export async function serveCommand(values) {
  const config = serveConfig(values, process.env);
  const defined = Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined));
  const telemetry = await startOtlpExport(process.env, 'layerfold-node');
  let node;
  if (config.ends && !config.shard) throw new Error('--ends is for a group member: give --shard I/S with it');
  if (config.shard) {
    if (!defined.layers) throw new Error('--shard needs --layers A-B: the range the group serves');
    node = await serveMember(Object.fromEntries(Object.entries(memberConfig(defined)).filter(([, v]) => v !== undefined)));
  } else {
    const { mmproj, ...rest } = defined;
    const encoder = mmproj === undefined ? undefined
      : openNodeEncoder(mmproj, { threads: config.threads, cacheDir: config.cacheDir, allowUnvalidatedSource: config.allowUnvalidatedSource });
    encoder?.catch(() => {});  // serve() reports a failed open as a failed load
    node = await serve({ ...rest, encoder });
  }
  const outcome = await new Promise((resolve) => {
    stopRequested().then(resolve);
    node.loaded.catch(() => resolve('load failed'));
  });
  if (outcome !== 'load failed') await node.shutdown();
  await telemetry?.shutdown();
  return outcome === 'load failed' ? 1 : 0;
}
