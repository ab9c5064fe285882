// What a layer node will hold in memory, estimated from the GGUF header before any tensor is
// read, so that a node with a fixed budget (an edge isolate, ~128 MB) refuses a layer range that
// cannot fit instead of failing half-loaded. The KV cache size mirrors Session::create
// (src/kv_cache.cpp) exactly; the scratch is an upper estimate of engine.cpp's Scratch plus the
// host's copies of one request. While loading, the engine rewrites attn_output and ffn_down
// unit-major in place (docs/threads.md) through a buffer of one such tensor, freed before any
// session exists: the peak is the larger of that buffer and the KV cache plus scratch.
import { LayerfoldError } from '../wasm/capi.js';

const F16 = 2;
const F32 = 4;
// kv_cache.h SessionOptions::attn_chunk: sliding layers keep n_swa + attn_chunk - 1 slots.
const ATTN_CHUNK = 64;
// shard_plan.h kFfnUnitTarget: an FFN is cut into about this many units, each with its partial sums.
const FFN_UNIT_TARGET = 32;
// engine.cpp kTokenBlock: partial sums cover at most this many tokens at a time.
const TOKEN_BLOCK = 32;
// Quantized activations (Q8_0-style blocks: 34 bytes per 32 values) for each of a layer's 7 matmuls.
const ACTIVATION_BYTES_PER_VALUE = 34 / 32;
const MATMULS_PER_LAYER = 7;

const MiB = 1024 * 1024;
const mib = (bytes) => `${(bytes / MiB).toFixed(1)} MiB`;

// Sliding-window layers as model_config.cpp decides: Gemma 4 lists them per layer; Gemma 3 makes
// every P-th layer global (P = sliding_window_pattern, default 6) when a window is set.
function isSliding(metadata, arch, il) {
  const pattern = metadata[`${arch}.attention.sliding_window_pattern`];
  if (arch === 'gemma3') {
    const period = pattern ?? 6;
    return (metadata[`${arch}.attention.sliding_window`] ?? 0) > 0 && il % period < period - 1;
  }
  return Boolean(Array.isArray(pattern) ? pattern[il] : pattern);
}

const perLayer = (value, il) => (Array.isArray(value) ? value[il] : value);

/**
 * Bytes a node of layers [begin, end) needs: its tensors, one session's KV cache at maxContext,
 * and the scratch of a forward of maxTokens tokens (plus logits on the head node).
 * @param {{metadata: object, tensors: Array<{name: string, ne: number[], n_bytes: number}>}} header
 * @param {string[]} tensorNames the node's tensors (lf_node_tensors_json)
 * @param {{begin: number, end: number, maxContext: number, maxTokens: number, withHead: boolean}} shape
 * @returns {{weights: number, kvCache: number, scratch: number, relayout: number}}
 * @example const needs = nodeMemoryNeeds(header, names, { begin: 0, end: 2, maxContext: 512, maxTokens: 128, withHead: false });
 */
export function nodeMemoryNeeds(header, tensorNames, { begin, end, maxContext, maxTokens, withHead }) {
  const { metadata } = header;
  const arch = metadata['general.architecture'];
  const byName = new Map(header.tensors.map((t) => [t.name, t]));
  const weights = tensorNames.reduce((sum, name) => sum + byName.get(name).n_bytes, 0);
  const relayout = tensorNames.filter((name) => /\.(attn_output|ffn_down)\.weight$/.test(name))
    .reduce((widest, name) => Math.max(widest, byName.get(name).n_bytes), 0);
  const ctx = maxContext > 0 ? maxContext : Number(metadata[`${arch}.context_length`]);
  const window = Number(metadata[`${arch}.attention.sliding_window`] ?? 0);
  const nEmbd = Number(metadata[`${arch}.embedding_length`]);
  // Output widths of the layer's weights [n_in, n_out] give its attention and FFN sizes.
  const width = (il, name) => byName.get(`blk.${il}.${name}.weight`)?.ne[1] ?? 0;
  let kvCache = 0;
  let qDim = 0, kvDim = 0, nFf = 0, units = FFN_UNIT_TARGET, widestInput = nEmbd;
  for (let il = begin; il < end; il++) {
    const capacity = isSliding(metadata, arch, il) ? Math.min(ctx, window + ATTN_CHUNK - 1) : ctx;
    kvCache += 2 * capacity * width(il, 'attn_k') * F16;
    qDim = Math.max(qDim, width(il, 'attn_q'));
    kvDim = Math.max(kvDim, width(il, 'attn_k'));
    nFf = Math.max(nFf, width(il, 'ffn_gate'));
    units = Math.max(units, Number(perLayer(metadata[`${arch}.attention.head_count_kv`], il) ?? 0));
    widestInput = Math.max(widestInput, width(il, 'attn_q'), width(il, 'ffn_gate'));
  }
  const T = maxTokens;
  const nVocab = byName.get('token_embd.weight')?.ne[1] ?? 0;
  const engine = F32 * T * (6 * nEmbd + 2 * qDim + 2 * kvDim + 3 * nFf)  // residual, q/k/v, gate/up/act
    + F32 * 2 * T * qDim                                                 // one worker's per-head queries and outputs
    + F32 * units * Math.min(T, TOKEN_BLOCK) * nEmbd                     // partial sums
    + Math.ceil(T * widestInput * ACTIVATION_BYTES_PER_VALUE) * MATMULS_PER_LAYER;
  const host = F32 * 3 * T * nEmbd + (withHead ? F32 * T * (nVocab + nEmbd) : 0);  // request in/out copies, logits
  return { weights, kvCache, scratch: engine + host, relayout };
}

/**
 * Throws LayerfoldError 'over_budget' (with neededBytes and availableBytes) when baseBytes (the
 * module's memory before loading) plus the needs exceed budgetBytes; returns the total otherwise.
 * @example checkMemoryBudget(needs, { baseBytes: lf.bytes().length, budgetBytes: 128 * 2 ** 20, layers: [0, 2] });
 */
export function checkMemoryBudget({ weights, kvCache, scratch, relayout = 0 }, { baseBytes, budgetBytes, layers }) {
  const needed = baseBytes + weights + Math.max(kvCache + scratch, relayout);
  if (needed <= budgetBytes) return needed;
  const error = new LayerfoldError('over_budget', `layers [${layers[0]}, ${layers[1]}) need ${needed} bytes (${mib(needed)}: ` +
    `weights ${mib(weights)}, KV cache of one session at max context ${mib(kvCache)}, scratch ${mib(scratch)} ` +
    `(or, while loading, ${mib(relayout)} to lay out one projection), ` +
    `module ${mib(baseBytes)}), but the memory budget is ${budgetBytes} bytes (${mib(budgetBytes)}): ` +
    'give this node fewer layers, a smaller max context or max tokens, or a larger budget');
  error.neededBytes = needed;
  error.availableBytes = budgetBytes;
  throw error;
}
