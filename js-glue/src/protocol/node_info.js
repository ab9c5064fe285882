// What a layer node says of itself, GET /v1/info (docs/http-api.md): its layers and sizes, which
// every later answer is checked against, its limits, and its K/V layers (kv_rows.js).
import { LayerfoldError } from '../wasm/capi.js';
import { CACHE_TYPES, kvLayersFromWire, kvLayersToWire } from './kv_rows.js';

/**
 * A node (LayerNode's shape) and the server's limits as /v1/info's JSON object; `model` as it
 * may be shown (the server redacts it).
 * @example encodeNodeInfo(node, { model: 'tiny.gguf', maxContext: 512, maxTokens: 2048, maxLogitsBytes: 64 << 20 })
 */
export function encodeNodeInfo(node, { model, maxContext, maxTokens, maxLogitsBytes }) {
  const info = node.info();
  return {
    model, layers: node.layers, n_layer: node.nLayer, n_embd: node.nEmbd, n_vocab: node.nVocab,
    has_embed: node.withEmbedding, has_head: node.withHead, build: info.build, threads: info.threads,
    sessions: info.sessions, kv_bytes: info.kvBytes, wasm_memory_bytes: info.wasmMemoryBytes,
    max_sessions: node.maxSessions, max_context: maxContext, max_tokens: maxTokens, max_logits_bytes: maxLogitsBytes,
    kv_rows_in: kvLayersToWire(node.kvRowsIn), kv_rows_out: kvLayersToWire(node.kvRowsOut),
    cache_type_k: node.cacheTypeK, cache_type_v: node.cacheTypeV, max_span: node.maxSpan,
    drafter: info.drafter ? { model: info.drafter.model, bytes_loaded: info.drafter.bytesLoaded } : null,
  };
}

// A positive safe integer, or 'bad_response' naming the field.
function count(info, field) {
  const value = info?.[field];
  if (!Number.isSafeInteger(value) || value < 1) throw new LayerfoldError('bad_response', `GET /v1/info: ${field} is ${JSON.stringify(value)?.slice(0, 40)}, not a positive integer`);
  return value;
}

// A cache type named by the field, f16 when absent, or 'bad_response' naming the field.
function cacheType(info, field) {
  const value = info?.[field] ?? 'f16';
  if (!CACHE_TYPES.includes(value)) throw new LayerfoldError('bad_response', `GET /v1/info: ${field} is ${JSON.stringify(value)?.slice(0, 40)}, not one of ${CACHE_TYPES.join(', ')}`);
  return value;
}

/**
 * The other way: the parsed JSON -> { layers, nLayer, nEmbd, nVocab, withEmbedding, withHead,
 * kvRowsIn, kvRowsOut, cacheTypeK, cacheTypeV, maxSpan (0 when not said), model, build, threads, sessions, kvBytes,
 * wasmMemoryBytes, drafter: {model, bytesLoaded} | null }. The sizes must be sizes, the layers a range within n_layer and the cache
 * types known ('f16' when not said), else 'bad_response' naming the field.
 * @example const info = decodeNodeInfo(await response.json());
 */
export function decodeNodeInfo(info) {
  const nLayer = count(info, 'n_layer');
  const [begin, end] = Array.isArray(info.layers) ? info.layers : [];
  if (!(Number.isSafeInteger(begin) && Number.isSafeInteger(end) && begin >= 0 && begin < end && end <= nLayer)) {
    throw new LayerfoldError('bad_response', `GET /v1/info: layers ${JSON.stringify(info.layers)?.slice(0, 40)} is not a range within n_layer ${nLayer}`);
  }
  return {
    layers: [begin, end], nLayer, nEmbd: count(info, 'n_embd'), nVocab: count(info, 'n_vocab'),
    withEmbedding: info.has_embed, withHead: info.has_head,
    kvRowsIn: kvLayersFromWire(info.kv_rows_in), kvRowsOut: kvLayersFromWire(info.kv_rows_out),
    cacheTypeK: cacheType(info, 'cache_type_k'), cacheTypeV: cacheType(info, 'cache_type_v'), maxSpan: maxSpanOf(info), model: info.model, build: info.build, threads: info.threads, sessions: info.sessions,
    kvBytes: info.kv_bytes, wasmMemoryBytes: info.wasm_memory_bytes, drafter: drafterOf(info.drafter),
  };
}

// The longest media span a node takes (LayerNode.maxSpan), 0 when not said, or 'bad_response'.
function maxSpanOf(info) {
  const value = info?.max_span ?? 0;
  if (!Number.isSafeInteger(value) || value < 0) throw new LayerfoldError('bad_response', `GET /v1/info: max_span is ${JSON.stringify(value)?.slice(0, 40)}, not a count`);
  return value;
}

// The draft model a node holds beside its head ({model, bytesLoaded}), null when none.
function drafterOf(drafter) {
  if (drafter === undefined || drafter === null) return null;
  if (typeof drafter !== 'object' || !Number.isSafeInteger(drafter.bytes_loaded)) {
    throw new LayerfoldError('bad_response', `GET /v1/info: drafter is ${JSON.stringify(drafter)?.slice(0, 60)}, not {"model", "bytes_loaded"}`);
  }
  return { model: String(drafter.model), bytesLoaded: drafter.bytes_loaded };
}
