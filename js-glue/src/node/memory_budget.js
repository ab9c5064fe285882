// What a layer node will hold in memory, known from the GGUF header before any tensor is read,
// so that a node with a fixed budget (an edge isolate, ~128 MB) refuses a layer range that cannot
// fit instead of failing half-loaded. The engine says what it allocates (lf_node_needs_json:
// its tensors, one session's KV cache, a forward's scratch, the buffer of the in-place relayout
// while loading); the host adds only its own copies of one request. The relayout buffer is freed
// before any session exists: the peak is the larger of it and the KV cache plus scratch.
import { LayerfoldError } from '../wasm/capi.js';

const F32 = 4;
// The host's copies of a forward of T rows (its input and output in WASM memory, the output read
// back) and, on the head node, of the logits call: F32 · T · (n_embd + n_vocab).
const REQUEST_COPIES = 3;

const MiB = 1024 * 1024;
const mib = (bytes) => `${(bytes / MiB).toFixed(1)} MiB`;

/**
 * What a node of layers [begin, end) loads and the bytes it needs: its tensors (names and
 * bytes), one session's KV cache at maxContext (0: the model's context length), and the scratch
 * of a forward of maxTokens rows on `threads` engine threads (plus the host's copies).
 * @param lf a bound module (wasm/capi.js)
 * @param {number} gguf the model's lf_gguf* in that module
 * @param {{n_embd: number, n_vocab: number}} info the model's configuration (gguf/header.js readModelInfo)
 * @param {{layers: [number, number], withEmbedding: boolean, withHead: boolean, maxContext: number,
 *          maxTokens: number, threads: number}} shape
 * @returns {{tensors: string[], weights: number, kvCache: number, scratch: number, relayout: number}}
 * @example const needs = nodeMemoryNeeds(lf, gguf, header.info, { layers: [0, 2], withEmbedding: true, withHead: false, maxContext: 512, maxTokens: 128, threads: 1 });
 */
export function nodeMemoryNeeds(lf, gguf, info, { layers: [begin, end], withEmbedding, withHead, maxContext, maxTokens, threads }) {
  const needs = lf.json(lf.fn.lf_node_needs_json(gguf, begin, end, withEmbedding ? 1 : 0, withHead ? 1 : 0, maxContext, maxTokens));
  const host = F32 * maxTokens * (REQUEST_COPIES * info.n_embd + (withHead ? info.n_vocab + info.n_embd : 0));
  return {
    tensors: needs.tensors,
    weights: needs.tensor_bytes,
    kvCache: needs.kv_bytes_per_session,
    scratch: needs.scratch_bytes + threads * needs.scratch_bytes_per_worker + host,
    relayout: needs.relayout_bytes,
  };
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
