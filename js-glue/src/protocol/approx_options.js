// The approximate modes' options (docs/approximate.md) in their three spellings, mapped here
// only: the JS API's object ({ ffnTopK: 0.5, ffnTopKLayers: { 3: 8192 } }), the engine's JSON
// (lf_session_set_approx: the same keys in snake_case) and a forward's HTTP query (the engine's
// keys as parameters, docs/http-api.md: flags 0 or 1, ffn_top_k_layers as LAYER:K,...).
// Keys and ranges are checked once, by the engine, whose invalid_argument error names the key:
// this module only spells, so a value it cannot read as a number goes on as text for the engine
// to refuse, and an unknown key goes on under its own name.
import { LayerfoldError } from '../wasm/capi.js';

// Query parameters whose 0/1 is true/false; every other one is a number, or ffn_top_k_layers.
const FLAGS = new Set(['truncated_attention', 'early_exit']);
const LAYER_LIST = 'ffn_top_k_layers';
const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i;

const snakeCase = (key) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camelCase = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const numberOrText = (text) => (NUMBER.test(text) ? Number(text) : text);

/**
 * True when approx (LayerNode.forward's, Pipeline's option) switches some mode on.
 * @example approxModesOn({ ffnTopK: 0.5 }) // true
 */
export function approxModesOn(approx = {}) {
  return Boolean(approx.truncatedAttention || approx.earlyExit || approx.ffnTopK > 0 ||
    Object.keys(approx.ffnTopKLayers ?? {}).length > 0);
}

/**
 * approx as the engine's JSON object (lf_session_set_approx): each key in snake_case, values as given.
 * @example engineApprox({ ffnTopK: 0.5, ffnTopKLayers: { 3: 8192 } }) // { ffn_top_k: 0.5, ffn_top_k_layers: { 3: 8192 } }
 */
export function engineApprox(approx = {}) {
  return Object.fromEntries(Object.entries(approx).map(([key, value]) => [snakeCase(key), value]));
}

/**
 * approx as a forward's query parameters, [name, text] pairs; modes left undefined are not sent.
 * @example approxQuery({ earlyExit: true, ffnTopKLayers: { 3: 8192 } }) // [['early_exit', '1'], ['ffn_top_k_layers', '3:8192']]
 */
export function approxQuery(approx = {}) {
  const pairs = [];
  for (const [key, value] of Object.entries(approx)) {
    const name = snakeCase(key);
    if (value === undefined) continue;
    if (typeof value === 'boolean') pairs.push([name, value ? '1' : '0']);
    else if (name === LAYER_LIST && value !== null && typeof value === 'object') {
      pairs.push([name, Object.entries(value).map(([layer, k]) => `${layer}:${k}`).join(',')]);
    } else pairs.push([name, typeof value === 'string' ? value : JSON.stringify(value)]);
  }
  return pairs;
}

/**
 * The other way: [name, text] pairs (a forward's query parameters other than its own, or the
 * CLI's flags) -> approx. Only the syntax of ffn_top_k_layers is refused here ('invalid_argument',
 * naming the option as spell(name) gives it); the values go to the engine to check.
 * @example approxFromQuery([['early_exit', '1'], ['exit_threshold', '0.05']]) // { earlyExit: true, exitThreshold: 0.05 }
 */
export function approxFromQuery(pairs, spell = (name) => name) {
  const approx = {};
  for (const [name, text] of pairs) {
    let value = numberOrText(text);
    if (FLAGS.has(name)) value = text === '1' ? true : text === '0' ? false : text;
    else if (name === LAYER_LIST) value = layerList(text, spell(name));
    approx[camelCase(name)] = value;
  }
  return approx;
}

// "3:8192,4:0.5" -> { 3: 8192, 4: 0.5 }; the layers' and Ks' values are the engine's to check.
function layerList(text, what) {
  const layers = {};
  if (text === '') return layers;
  for (const item of text.split(',')) {
    const parts = item.split(':');
    if (parts.length !== 2) throw new LayerfoldError('invalid_argument', `${what} ${text.slice(0, 40)}: expected LAYER:K,LAYER:K...`);
    layers[parts[0]] = numberOrText(parts[1]);
  }
  return layers;
}
