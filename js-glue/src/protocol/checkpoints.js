// How many checkpoints a session keeps (LayerNode.checkpoint's `keep`, the node protocol's
// ?keep=): each holds a copy of the rows of every sliding ring that a continuation reads, up to
// n_swa - 1 positions per ring layer, so the count bounds what they cost per session.
import { LayerfoldError } from '../wasm/capi.js';

export const MAX_CHECKPOINTS = 8;
export const DEFAULT_CHECKPOINTS = 4;

/**
 * The refusal of cutting session `id` to nPast positions (LayerNode.truncate's), or null when
 * nPast is a count of positions.
 * @example const refusal = cutRefusal('a', -1); // LayerfoldError 'invalid_argument'
 */
export function cutRefusal(id, nPast) {
  if (Number.isInteger(nPast) && nPast >= 0 && nPast <= 0x7fffffff) return null;
  return new LayerfoldError('invalid_argument', `truncate("${id}"): nPast must be a whole number of positions >= 0, not ${nPast}`);
}

/**
 * The refusal of keeping `keep` checkpoints of session `id` (LayerNode.checkpoint's), or null
 * when keep is 1 to MAX_CHECKPOINTS.
 * @example const refusal = keepRefusal('a', 9); // LayerfoldError 'invalid_argument'
 */
export function keepRefusal(id, keep) {
  if (Number.isInteger(keep) && keep >= 1 && keep <= MAX_CHECKPOINTS) return null;
  return new LayerfoldError('invalid_argument', `checkpoint("${id}"): keep must be a whole number in [1, ${MAX_CHECKPOINTS}], not ${keep}`);
}
