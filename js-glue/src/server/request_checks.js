// Checks of everything a client sends a layer node, before any session is touched: each returns
// the parsed value or throws an HttpError naming the input, the limit and what was expected.
import { HttpError } from './http_error.js';

const SESSION_ID = /^[A-Za-z0-9._~-]{1,128}$/;
const F32 = 4;

/**
 * A session id as the protocol allows it; "." and ".." are refused too, so that no id reads as
 * a path segment anywhere it is logged or proxied.
 * @example sessionId('chat-1') // 'chat-1'
 */
export function sessionId(raw) {
  if (!SESSION_ID.test(raw ?? '') || /^\.+$/.test(raw)) {
    throw new HttpError('bad_session_id', `session id ${JSON.stringify(String(raw ?? '').slice(0, 140))} is not 1-128 characters of A-Z a-z 0-9 . _ ~ - (and not only dots)`);
  }
  return raw;
}

/**
 * A required non-negative integer query parameter, in decimal digits only.
 * @example position('12', 'start_pos') // 12
 */
export function position(raw, name) {
  if (raw === undefined) throw new HttpError('bad_parameter', `${name} is required (a non-negative integer)`);
  if (!/^\d{1,15}$/.test(raw)) throw new HttpError('bad_parameter', `${name}=${JSON.stringify(raw.slice(0, 40))}: expected a non-negative integer below 10^15`);
  return Number(raw);
}

/**
 * An optional 0/1 flag (absent: false).
 * @example flag('1', 'last_only') // true
 */
export function flag(raw, name) {
  if (raw === undefined || raw === '0') return false;
  if (raw === '1') return true;
  throw new HttpError('bad_parameter', `${name}=${JSON.stringify(raw.slice(0, 40))}: expected 0 or 1`);
}

// A decimal number in [lo, hi] (an integer when asked) from a query parameter.
function numberParameter(raw, name, lo, hi, integer = false) {
  const value = /^(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(raw) ? Number(raw) : NaN;
  if (!(value >= lo && value <= hi) || (integer && !Number.isInteger(value))) {
    throw new HttpError('bad_parameter', `${name}=${JSON.stringify(raw.slice(0, 40))}: expected ${integer ? 'an integer' : 'a number'} from ${lo} to ${hi}`);
  }
  return value;
}

// Query parameter -> LayerNode.forward's approx key, and the range of its value.
const APPROX_NUMBERS = [
  ['truncation_threshold', 'truncationThreshold', 0, 1],
  ['exit_threshold', 'exitThreshold', 0, 3.4e38],
  ['exit_window', 'exitWindow', 1, 16, true],
  ['ffn_top_k', 'ffnTopK', 0, 1e9],
  ['ffn_top_k_threshold', 'ffnTopKThreshold', 0, 1],
];

/**
 * The approximate modes a forward asks for (docs/approximate.md) from its query parameters:
 * truncated_attention=0|1, truncation_threshold; early_exit=0|1, exit_threshold, exit_window;
 * ffn_top_k, ffn_top_k_layers=LAYER:K,..., ffn_top_k_threshold. None: the exact engine.
 * @example approxParameters((name) => ({ truncated_attention: '1' })[name]) // { truncatedAttention: true }
 */
export function approxParameters(query) {
  const approx = {};
  if (flag(query('truncated_attention'), 'truncated_attention')) approx.truncatedAttention = true;
  if (flag(query('early_exit'), 'early_exit')) approx.earlyExit = true;
  for (const [name, key, lo, hi, integer] of APPROX_NUMBERS) {
    const raw = query(name);
    if (raw !== undefined) approx[key] = numberParameter(raw, name, lo, hi, integer);
  }
  const layers = query('ffn_top_k_layers');
  if (layers !== undefined) {
    approx.ffnTopKLayers = {};
    for (const item of layers.split(',')) {
      const [layer, k, extra] = item.split(':');
      if (k === undefined || extra !== undefined) {
        throw new HttpError('bad_parameter', `ffn_top_k_layers=${JSON.stringify(layers.slice(0, 40))}: expected LAYER:K,LAYER:K...`);
      }
      approx.ffnTopKLayers[numberParameter(layer, 'ffn_top_k_layers layer', 0, 1e6, true)] = numberParameter(k, `ffn_top_k_layers K of layer ${layer}`, 0, 1e9);
    }
  }
  return approx;
}

/**
 * The early-exit state a forward's last row arrives in, from the x-layerfold-exit-state header
 * (the previous node's x-layerfold-approx early_exit): null when absent. Each field is checked
 * for its type here (exit_layer an integer ≥ -1, recent_updates an array of finite numbers ≥ 0),
 * and the engine checks the array's length against its exit window before any session is touched.
 * @example exitStateHeader('{"exit_layer":-1,"recent_updates":[0.2]}') // { exit_layer: -1, recent_updates: [0.2] }
 */
export function exitStateHeader(raw) {
  if (raw === undefined || raw === null) return null;
  let state = null;
  try {
    state = raw.length <= 4096 ? JSON.parse(raw) : null;
  } catch {
    state = null;
  }
  const bad = (why) => new HttpError('bad_parameter', `x-layerfold-exit-state ${JSON.stringify(raw.slice(0, 80))}: ${why}`);
  if (state === null || typeof state !== 'object' || Array.isArray(state) ||
      Object.keys(state).some((key) => key !== 'exit_layer' && key !== 'recent_updates')) {
    throw bad('expected a JSON object {"exit_layer", "recent_updates"}');
  }
  if ('exit_layer' in state && !(Number.isSafeInteger(state.exit_layer) && state.exit_layer >= -1)) {
    throw bad('exit_layer must be an integer ≥ -1 (-1: not exited)');
  }
  if ('recent_updates' in state && !(Array.isArray(state.recent_updates) &&
      state.recent_updates.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0 && x <= 3.4e38))) {
    throw bad('recent_updates must be an array of finite numbers ≥ 0');
  }
  return state;
}

/**
 * An optional Idempotency-Key: 1 to 128 visible ASCII characters (absent: undefined).
 * @example idempotencyKey('7f3c') // '7f3c'
 */
export function idempotencyKey(raw) {
  if (raw === undefined || raw === null) return undefined;
  if (!/^[\x21-\x7e]{1,128}$/.test(raw)) {
    throw new HttpError('bad_parameter', `Idempotency-Key ${JSON.stringify(raw.slice(0, 40))}: expected 1 to 128 visible ASCII characters`);
  }
  return raw;
}

/**
 * An optional top_k in [1, nVocab] (absent: null).
 * @example topKParameter('5', 1024) // 5
 */
export function topKParameter(raw, nVocab) {
  if (raw === undefined) return null;
  const k = /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!(k >= 1 && k <= nVocab)) throw new HttpError('bad_parameter', `top_k=${JSON.stringify(raw.slice(0, 40))}: expected an integer from 1 to n_vocab ${nVocab}`);
  return k;
}

/**
 * The media type of the request, parameters ignored, must be `expected`.
 * @example contentType('application/octet-stream', 'application/octet-stream')
 */
export function contentType(header, expected) {
  const type = (header ?? '').split(';')[0].trim().toLowerCase();
  if (type !== expected) throw new HttpError('bad_content_type', `Content-Type ${JSON.stringify(header ?? '(none)')}: expected ${expected}`);
}

/**
 * A body of little-endian float32 hidden states [n, nEmbd], n ≥ 1, every value finite.
 * @example const hidden = hiddenStates(await request.arrayBuffer(), 64);
 */
export function hiddenStates(buffer, nEmbd) {
  const rowBytes = F32 * nEmbd;
  if (buffer.byteLength === 0 || buffer.byteLength % rowBytes !== 0) {
    throw new HttpError('bad_length', `body of ${buffer.byteLength} bytes: expected a positive multiple of 4 · n_embd = ${rowBytes} bytes (float32 rows of n_embd ${nEmbd})`);
  }
  const hidden = new Float32Array(buffer);
  const bad = hidden.findIndex((x) => !Number.isFinite(x));
  if (bad >= 0) {
    throw new HttpError('not_finite', `value ${hidden[bad]} at row ${Math.floor(bad / nEmbd)}, column ${bad % nEmbd}: hidden states must be finite`);
  }
  return hidden;
}

/**
 * The JSON body {"tokens": [id, ...]} of an embed request: 1 to maxTokens ids in [0, nVocab).
 * @example tokenIds('{"tokens":[2,818]}', 262144, 2048) // Int32Array [2, 818]
 */
export function tokenIds(text, nVocab, maxTokens) {
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError('bad_parameter', 'body is not JSON: expected {"tokens": [id, ...]}');
  }
  const tokens = body?.tokens;
  if (!Array.isArray(tokens) || tokens.length === 0 || tokens.length > maxTokens) {
    throw new HttpError('bad_parameter', `"tokens" must be an array of 1 to ${maxTokens} token ids`);
  }
  const bad = tokens.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= nVocab);
  if (bad >= 0) throw new HttpError('bad_parameter', `tokens[${bad}] = ${JSON.stringify(tokens[bad])}: expected an integer from 0 to n_vocab - 1 = ${nVocab - 1}`);
  return Int32Array.from(tokens);
}
