// The edge worker's settings, from its environment (wrangler.toml vars and secrets), checked
// once per isolate: a bad value is an error naming the variable and what was expected.
import { layerRange, memberShard } from '../src/pipeline/nodes_spec.js';
import { DEFAULT_ROW_CACHE_BYTES } from '../src/node/per_layer_rows.js';
import { CACHE_TYPES } from '../src/protocol/kv_rows.js';
import { checkAuthToken } from '../src/server/app.js';

/** An isolate's memory on Workers-style runtimes (128 MB), the default budget of a node. */
export const DEFAULT_MEMORY_BUDGET_BYTES = 128 * 1024 * 1024;

function integer(env, name, fallback, min) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) throw new Error(`${name}=${JSON.stringify(String(raw))}: expected an integer ≥ ${min}`);
  return value;
}

// CACHE_TYPE_K / CACHE_TYPE_V as `layerfold serve` takes them; f16 when unset.
function cacheType(env, name) {
  const raw = env[name];
  if (raw === undefined || raw === '') return 'f16';
  if (!CACHE_TYPES.includes(raw)) throw new Error(`${name}=${JSON.stringify(String(raw))}: expected one of ${CACHE_TYPES.join(', ')}`);
  return raw;
}

// LAYERS as `layerfold serve --layers` takes it; undefined for every layer.
function layers(raw) {
  if (raw === undefined || raw === '') return undefined;
  const range = layerRange(String(raw));
  if (!range) throw new Error(`LAYERS=${JSON.stringify(String(raw))}: expected FIRST-LAST (inclusive, e.g. "0-3")`);
  return range;
}

// SHARD as `layerfold serve --shard` takes it; undefined for a layer node.
function shard(raw, range) {
  if (raw === undefined || raw === '') return undefined;
  const value = memberShard(String(raw));
  if (!value) throw new Error(`SHARD=${JSON.stringify(String(raw))}: expected I/S, member I (0-based) of a group of S >= 1`);
  if (!range) throw new Error('SHARD needs LAYERS=FIRST-LAST: the range the group serves');
  return value;
}

// ENDS (1 or true) with SHARD: the member holds its slice of the model's ends (serve --ends).
function ends(raw, shardText) {
  if (raw === undefined || raw === '' || raw === '0' || raw === 'false') return false;
  if (raw !== '1' && raw !== 'true') throw new Error(`ENDS=${JSON.stringify(String(raw))}: expected 1 or true (or 0, false)`);
  if (!shardText) throw new Error('ENDS is for a group member: set SHARD=I/S with it');
  return true;
}

/**
 * The node's settings: the R2 binding MODEL, MODEL_KEY (required), LAYERS, MEMORY_BUDGET_BYTES,
 * MAX_CONTEXT (0: the model's), MAX_TOKENS (rows per request), MAX_SESSIONS, MAX_QUEUE,
 * PER_LAYER_ROW_CACHE_BYTES (the first node of a model with per-layer embeddings: the rows of
 * per_layer_token_embd it keeps; default node/per_layer_rows.js's), CACHE_TYPE_K and
 * CACHE_TYPE_V (the KV cache's types: f16, q8_0, q4_0; default f16), DRAFT_MODEL_KEY (on the node
 * serving the last layers: the key of Gemma 4's MTP drafter of the model in the same bucket,
 * loaded beside the head and counted in the budget), SHARD (I/S: serve member I of a
 * tensor-parallel group of S over LAYERS instead of a node, docs/tensor-parallel.md), ENDS (1 with
 * SHARD: the member also holds its vocabulary slice of the model's ends LAYERS touches), and the
 * AUTH_TOKEN secret.
 * @example edgeConfig({ MODEL: env.MODEL, MODEL_KEY: 'tiny.gguf', LAYERS: '0-0' }).layers // [0, 1]
 */
export function edgeConfig(env) {
  if (typeof env.MODEL?.get !== 'function') throw new Error('no R2 binding MODEL: bind the bucket holding the GGUF as MODEL ([[r2_buckets]] binding = "MODEL")');
  if (!env.MODEL_KEY) throw new Error('MODEL_KEY is not set: the key of the GGUF in the MODEL bucket');
  return {
    bucket: env.MODEL,
    key: env.MODEL_KEY,
    draftKey: env.DRAFT_MODEL_KEY || undefined,
    layers: layers(env.LAYERS),
    shard: shard(env.SHARD, layers(env.LAYERS)),
    ends: ends(env.ENDS, env.SHARD),
    memoryBudgetBytes: integer(env, 'MEMORY_BUDGET_BYTES', DEFAULT_MEMORY_BUDGET_BYTES, 1),
    maxContext: integer(env, 'MAX_CONTEXT', 0, 0),
    maxTokens: integer(env, 'MAX_TOKENS', 256, 1),
    maxSessions: integer(env, 'MAX_SESSIONS', 16, 1),
    maxQueue: integer(env, 'MAX_QUEUE', 16, 0),
    perLayerRowCacheBytes: integer(env, 'PER_LAYER_ROW_CACHE_BYTES', DEFAULT_ROW_CACHE_BYTES, 0),
    cacheTypeK: cacheType(env, 'CACHE_TYPE_K'),
    cacheTypeV: cacheType(env, 'CACHE_TYPE_V'),
    // Set but empty would serve the node open: refused like a token with whitespace.
    authToken: checkAuthToken(env.AUTH_TOKEN),
  };
}
