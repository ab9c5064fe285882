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
  return finiteValues(new Float32Array(buffer), nEmbd, 'hidden states');
}

/**
 * floats (rows of `width`) as they are, or 'not_finite' naming the first value that is not
 * finite and `what` it is part of.
 * @example finiteValues(perLayer, 256, 'per-layer inputs');
 */
export function finiteValues(floats, width, what) {
  const bad = floats.findIndex((x) => !Number.isFinite(x));
  if (bad >= 0) {
    throw new HttpError('not_finite', `value ${floats[bad]} at row ${Math.floor(bad / width)}, column ${bad % width}: ${what} must be finite`);
  }
  return floats;
}
