// The approximate modes' options as the JS host passes them (docs/approximate.md); no imports,
// so the edge worker's bundle can use it.

/**
 * True when approx (LayerNode.forward's, Pipeline's option) switches some mode on.
 * @example approxModesOn({ ffnTopK: 0.5 }) // true
 */
export function approxModesOn(approx = {}) {
  return Boolean(approx.truncatedAttention || approx.earlyExit || approx.ffnTopK > 0 ||
    Object.keys(approx.ffnTopKLayers ?? {}).length > 0);
}

// LayerNode.forward's approx keys -> the HTTP forward's query parameters (docs/http-api.md).
const QUERY_NAMES = {
  truncatedAttention: 'truncated_attention', truncationThreshold: 'truncation_threshold',
  earlyExit: 'early_exit', exitThreshold: 'exit_threshold', exitWindow: 'exit_window',
  ffnTopK: 'ffn_top_k', ffnTopKThreshold: 'ffn_top_k_threshold', ffnTopKLayers: 'ffn_top_k_layers',
};

/**
 * approx as the query parameters of a remote forward: [name, value] pairs.
 * @example approxQuery({ earlyExit: true, ffnTopKLayers: { 3: 8192 } }) // [['early_exit', '1'], ['ffn_top_k_layers', '3:8192']]
 */
export function approxQuery(approx = {}) {
  const pairs = [];
  for (const [key, value] of Object.entries(approx)) {
    const name = QUERY_NAMES[key];
    if (name === undefined) throw new TypeError(`approx: unknown mode option "${key}" (known: ${Object.keys(QUERY_NAMES).join(', ')})`);
    if (value === undefined || value === false || (key === 'ffnTopKLayers' && Object.keys(value).length === 0)) continue;
    if (value === true) pairs.push([name, '1']);
    else if (key === 'ffnTopKLayers') pairs.push([name, Object.entries(value).map(([layer, k]) => `${layer}:${k}`).join(',')]);
    else pairs.push([name, String(value)]);
  }
  return pairs;
}
