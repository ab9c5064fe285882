// A forward's bodies (docs/http-api.md), little-endian and row-major:
//   request  hidden states [n, n_embd] f32, then (a model with per-layer embeddings) the node's
//            layers' per-layer inputs [layers, n, n_embd_per_layer] f32, then the K/V rows of
//            the source layers it mirrors (kv_rows.js, its kvRowsIn)
//   answer   hidden states [n, n_embd] f32 ([1, n_embd] with last_only), then the K/V rows it
//            hands out (its kvRowsOut), every position of the call
// A node's shape, { nEmbd, perLayerFloats, kvRowsIn, kvRowsOut }, says what its bodies hold:
// perLayerFloats the per-layer floats of one row (its layers · n_embd_per_layer). Lengths are
// checked here ('bad_length', naming what was expected); values are the receiver's to check.
import { LayerfoldError } from '../wasm/capi.js';
import { kvRowBytes, packKvRows, unpackKvRows } from './kv_rows.js';

const F32 = 4;

/** floats as the bytes they are. */
export const asBytes = (floats) => new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);

/** The parts (Uint8Arrays) laid end to end, as one Uint8Array. */
export function joined(parts) {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/**
 * Bytes of one row of a forward request: its floats, then its K/V rows.
 * @example forwardRowBytes({ nEmbd: 64, perLayerFloats: 0, kvRowsIn: [] }) // 256
 */
export function forwardRowBytes({ nEmbd, perLayerFloats = 0, kvRowsIn = [] }) {
  return (nEmbd + perLayerFloats) * F32 + kvRowBytes(kvRowsIn);
}

/**
 * A forward request's body: hidden [n, nEmbd], perLayer [layers, n, nPl] (or null), kvRows
 * { [layer]: Uint8Array } of the shape's kvRowsIn (packKvRows refuses missing or odd-sized rows).
 * @example const body = encodeForwardBody({ hidden, perLayer: null, kvRows: null }, { nEmbd: 64, kvRowsIn: [] });
 */
export function encodeForwardBody({ hidden, perLayer = null, kvRows = null }, { nEmbd, kvRowsIn = [] }) {
  const n = hidden.length / nEmbd;
  const parts = [asBytes(hidden)];
  if (perLayer) parts.push(asBytes(perLayer));
  if (kvRowsIn.length) parts.push(packKvRows(kvRowsIn, kvRows, n));
  return parts.length === 1 ? parts[0] : joined(parts);
}

/**
 * The other way: an ArrayBuffer -> { rows, hidden, perLayer (null without), kvRows (null
 * without) }, the floats views of it, the K/V rows copied; 'bad_length' unless it is a
 * positive whole number of rows.
 * @example const { rows, hidden } = decodeForwardBody(await request.arrayBuffer(), { nEmbd: 64 });
 */
export function decodeForwardBody(buffer, shape) {
  const { nEmbd, perLayerFloats = 0, kvRowsIn = [] } = shape;
  const rowBytes = forwardRowBytes(shape);
  if (buffer.byteLength === 0 || buffer.byteLength % rowBytes !== 0) {
    const parts = [`${nEmbd} float32 hidden values`];
    if (perLayerFloats) parts.push(`${perLayerFloats} float32 per-layer inputs`);
    if (kvRowsIn.length) parts.push(`${kvRowBytes(kvRowsIn)} bytes of the K/V rows of layers ${kvRowsIn.map((l) => l.layer).join(', ')}`);
    throw new LayerfoldError('bad_length', `body of ${buffer.byteLength} bytes: expected a positive multiple of ${rowBytes} bytes (per row ${parts.join(', then ')})`);
  }
  const rows = buffer.byteLength / rowBytes;
  const floats = new Float32Array(buffer, 0, rows * (nEmbd + perLayerFloats));
  return {
    rows,
    hidden: floats.subarray(0, rows * nEmbd),
    perLayer: perLayerFloats ? floats.subarray(rows * nEmbd) : null,
    kvRows: kvRowsIn.length ? unpackKvRows(kvRowsIn, new Uint8Array(buffer, floats.byteLength), rows) : null,
  };
}

/**
 * Bytes of a forward's answer to n rows.
 * @example forwardAnswerBytes({ nEmbd: 64, kvRowsOut: [] }, 5, { lastOnly: true }) // 256
 */
export function forwardAnswerBytes({ nEmbd, kvRowsOut = [] }, n, { lastOnly = false } = {}) {
  return (lastOnly ? 1 : n) * nEmbd * F32 + n * kvRowBytes(kvRowsOut);
}

/**
 * A forward's answer: its output hidden states, then the K/V rows of the shape's kvRowsOut of
 * the call's n positions (the hidden states alone, as they are, without kvRowsOut).
 * @example const body = encodeForwardAnswer(out, node.kvRowsOf(out), { nEmbd: 64, kvRowsOut: [] }, 5);
 */
export function encodeForwardAnswer(hidden, kvRows, { kvRowsOut = [] }, n) {
  return kvRowsOut.length ? joined([asBytes(hidden), packKvRows(kvRowsOut, kvRows, n)]) : hidden;
}

/**
 * The other way: an ArrayBuffer of exactly forwardAnswerBytes() -> { hidden (its own buffer),
 * kvRows (null without kvRowsOut) }; 'bad_length' when it is not.
 * @example const { hidden, kvRows } = decodeForwardAnswer(buffer, { nEmbd: 64, kvRowsOut }, 5, { lastOnly: true });
 */
export function decodeForwardAnswer(buffer, shape, n, { lastOnly = false } = {}) {
  const { nEmbd, kvRowsOut = [] } = shape;
  const bytes = forwardAnswerBytes(shape, n, { lastOnly });
  if (buffer.byteLength !== bytes) throw new LayerfoldError('bad_length', `a forward's answer of ${buffer.byteLength} bytes, expected ${bytes}`);
  const floatBytes = (lastOnly ? 1 : n) * nEmbd * F32;
  return {
    hidden: new Float32Array(kvRowsOut.length ? buffer.slice(0, floatBytes) : buffer),
    kvRows: kvRowsOut.length ? unpackKvRows(kvRowsOut, new Uint8Array(buffer, floatBytes), n) : null,
  };
}
