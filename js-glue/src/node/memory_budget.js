// What a layer node will hold in memory, known from the GGUF header before any tensor is read,
// so that a node with a fixed budget (an edge isolate, ~128 MB) refuses a layer range that cannot
// fit instead of failing half-loaded. The engine says what it allocates (lf_node_needs_json:
// its tensors, one session's KV cache, a forward's scratch, the buffer of the in-place relayout
// while loading); the host adds only its own copies of one request and, on a first node reading
// the per-layer embedding table by rows, its cache of rows. The relayout buffer is freed
// before any session exists: the peak is the larger of it and the KV cache plus scratch.
import { kvLayersFromWire } from '../protocol/kv_rows.js';
import { LayerfoldError } from '../wasm/capi.js';
import { withCStrings } from '../wasm/wasm_copies.js';
import { DEFAULT_ROW_CACHE_BYTES, rowCacheBytes } from './per_layer_rows.js';

const F32 = 4;
// The host's copies of a forward of T rows (its input and output in WASM memory, the output read
// back) and, on the head node, of the logits call: F32 · T · (n_embd + n_vocab).
const REQUEST_COPIES = 3;

const MiB = 1024 * 1024;
const mib = (bytes) => `${(bytes / MiB).toFixed(1)} MiB`;

/**
 * What a node of layers [begin, end) loads and the bytes it needs: its tensors (names and
 * bytes), one session's KV cache at maxContext (0: the model's context length), and the scratch
 * of a forward of maxTokens rows on `threads` engine threads (plus the host's copies). A first
 * node with per-layer embeddings and perLayerRows reads per_layer_token_embd by rows
 * (node/per_layer_rows.js): the table is not among its weights; it holds rowCache bytes of
 * rows instead (rowCacheBytes bounded by the table), and a call's rows in its scratch. The KV
 * cache holds K and V in cacheTypeK and cacheTypeV ('f16' by default, 'q8_0', 'q4_0'), its sliding
 * rings room for a media span of maxSpan rows (lf_model_set_max_span; 0 by default).
 * @param lf a bound module (wasm/capi.js)
 * @param {number} gguf the model's lf_gguf* in that module
 * @param {{n_embd: number, n_vocab: number}} info the model's configuration (gguf/header.js readModelInfo)
 * @param {{layers: [number, number], withEmbedding: boolean, withHead: boolean, maxContext: number,
 *          maxTokens: number, threads: number, perLayerRows?: boolean, rowCacheBytes?: number,
 *          cacheTypeK?: string, cacheTypeV?: string, maxSpan?: number}} shape
 * A node holding shared-KV layers without their source layer mirrors the source's cache (counted
 * in kvCache by the engine) from K/V rows it is given with each call (kvRowsIn), and the node of
 * a source hands its rows out (kvRowsOut): [{layer, bytesPerToken}] each, docs/forward-pass.md,
 * "Shared KV across nodes"; the host holds a call's rows twice (its copy and WASM memory's).
 * @returns {{tensors: string[], weights: number, kvCache: number, scratch: number, relayout: number,
 *            rowBytes: number, rowCache: number, kvRowsIn: Array<{layer: number, bytesPerToken: number}>,
 *            kvRowsOut: Array<{layer: number, bytesPerToken: number}>}}
 * @example const needs = nodeMemoryNeeds(lf, gguf, header.info, { layers: [0, 2], withEmbedding: true, withHead: false, maxContext: 512, maxTokens: 128, threads: 1 });
 */
export function nodeMemoryNeeds(lf, gguf, info, { layers: [begin, end], withEmbedding, withHead, maxContext, maxTokens, threads,
  perLayerRows = false, rowCacheBytes: cacheBytes = DEFAULT_ROW_CACHE_BYTES, cacheTypeK = 'f16', cacheTypeV = 'f16', maxSpan = 0 }) {
  const needs = withCStrings(lf, [cacheTypeK, cacheTypeV], ([k, v]) => lf.json(lf.fn.lf_node_needs_json(gguf, begin, end,
    withEmbedding ? 1 : 0, withHead ? 1 : 0, maxContext, maxTokens, perLayerRows ? 1 : 0, k, v, maxSpan)));
  const host = F32 * maxTokens * (REQUEST_COPIES * info.n_embd + (withHead ? info.n_vocab + info.n_embd : 0));
  const rowBytes = needs.per_layer_row_bytes;
  const byRows = perLayerRows && rowBytes > 0;
  // A call's rows: read into a host buffer, then copied into WASM memory for the engine.
  const callRows = byRows ? 2 * maxTokens * rowBytes : 0;
  // The engine's JSON spells the shipped layers as the wire does.
  const kvRowsIn = kvLayersFromWire(needs.kv_rows_in);
  const kvRowsOut = kvLayersFromWire(needs.kv_rows_out);
  const kvRows = 2 * maxTokens * [...kvRowsIn, ...kvRowsOut].reduce((sum, l) => sum + l.bytesPerToken, 0);
  return {
    tensors: needs.tensors,
    weights: needs.tensor_bytes,
    kvCache: needs.kv_bytes_per_session,
    scratch: needs.scratch_bytes + threads * needs.scratch_bytes_per_worker + host + callRows + kvRows,
    relayout: needs.relayout_bytes,
    rowBytes: byRows ? rowBytes : 0,
    rowCache: byRows ? rowCacheBytes({ rowBytes, nVocab: info.n_vocab, cacheBytes }) : 0,
    kvRowsIn,
    kvRowsOut,
  };
}

/**
 * What member `member` of a tensor-parallel group of `members` over layers [begin, end) needs,
 * in nodeMemoryNeeds' terms (lf_member_needs_json): its slices of the layers' tensors, one
 * session's cache of its KV heads at maxContext (K and V in cacheTypeK and cacheTypeV), a call of
 * maxTokens rows on `threads` engine threads, and the host's copies in WASM memory (a call's
 * input and output, the largest piece and the per-layer inputs it is handed; with `ends`, its
 * slices of the model's ends and their calls' buffers). A member lays out
 * its Q4_0 slices into row strips through one strip (relayout) and ships no K/V rows.
 * @example const needs = memberMemoryNeeds(lf, gguf, info, { layers: [2, 4], member: 0, members: 3, maxContext: 4096, maxTokens: 128, threads: 1, cacheTypeK: 'q8_0' });
 */
export function memberMemoryNeeds(lf, gguf, info, { layers: [begin, end], member, members, maxContext, maxTokens, threads,
  cacheTypeK = 'f16', cacheTypeV = 'f16', ends = false }) {
  const needs = withCStrings(lf, [cacheTypeK, cacheTypeV], ([k, v]) =>
    lf.json(lf.fn.lf_member_needs_json(gguf, begin, end, member, members, maxContext, maxTokens, k, v, ends ? 1 : 0)));
  const host = F32 * (REQUEST_COPIES * maxTokens * info.n_embd + needs.piece_floats + needs.per_layer_floats);
  return {
    tensors: needs.tensors,
    weights: needs.tensor_bytes,
    kvCache: needs.kv_bytes_per_session,
    scratch: needs.scratch_bytes + threads * needs.scratch_bytes_per_worker + host,
    relayout: needs.relayout_bytes,
    rowBytes: 0,
    rowCache: 0,
    kvRowsIn: [],
    kvRowsOut: [],
  };
}

/**
 * What a node of these needs holds at its peak, on a module of baseBytes before loading.
 * @example const bytes = neededBytes(nodeMemoryNeeds(lf, gguf, info, shape), lf.bytes().length);
 */
export function neededBytes({ weights, kvCache, scratch, relayout = 0, rowCache = 0, drafter = 0 }, baseBytes) {
  return baseBytes + weights + drafter + rowCache + Math.max(kvCache + scratch, relayout);
}

/**
 * Throws LayerfoldError 'over_budget' (with neededBytes and availableBytes) when baseBytes (the
 * module's memory before loading) plus the needs exceed budgetBytes; returns the total otherwise.
 * `who` names what needs them in the message (default: the layers).
 * @example checkMemoryBudget(needs, { baseBytes: lf.bytes().length, budgetBytes: 128 * 2 ** 20, layers: [0, 2] });
 */
export function checkMemoryBudget({ weights, kvCache, scratch, relayout = 0, rowCache = 0, drafter = 0 },
  { baseBytes, budgetBytes, layers, who = `layers [${layers[0]}, ${layers[1]})` }) {
  const needed = neededBytes({ weights, kvCache, scratch, relayout, rowCache, drafter }, baseBytes);
  if (needed <= budgetBytes) return needed;
  const error = new LayerfoldError('over_budget', `${who} need ${needed} bytes (${mib(needed)}: ` +
    `weights ${mib(weights)}, ${drafter ? `draft model ${mib(drafter)}, ` : ''}${rowCache ? `per-layer embedding rows cached ${mib(rowCache)}, ` : ''}` +
    `KV cache of one session at max context ${mib(kvCache)}, scratch ${mib(scratch)} ` +
    `(or, while loading, ${mib(relayout)} to lay out one projection), ` +
    `module ${mib(baseBytes)}), but the memory budget is ${budgetBytes} bytes (${mib(budgetBytes)}): ` +
    `give this node fewer layers, a smaller max context or max tokens${rowCache ? ', a smaller per-layer row cache' : ''}${drafter ? ', no draft model' : ''}, or a larger budget`);
  error.neededBytes = needed;
  error.availableBytes = budgetBytes;
  throw error;
}

/**
 * The budget check of a node about to load, on a module of baseBytes: throws as
 * checkMemoryBudget, or returns the figures a node reports as its memory (the needs without the
 * names of the tensors it loads and of the layers whose rows it ships) and kvBytes, what the
 * budget leaves for KV caches: one session's and, beyond it, more sessions'.
 * @example const { memory, kvBytes } = reserveMemory(needs, { baseBytes: lf.bytes().length, budgetBytes: 128 * 2 ** 20, layers: [0, 2], maxTokens: 512 });
 */
export function reserveMemory({ tensors, kvRowsIn, kvRowsOut, ...needs }, { baseBytes, budgetBytes, layers, maxTokens }) {
  const neededBytes = checkMemoryBudget(needs, { baseBytes, budgetBytes, layers });
  return {
    memory: { budgetBytes, neededBytes, baseBytes, maxTokens, ...needs },
    kvBytes: budgetBytes - (neededBytes - needs.kvCache),
  };
}
