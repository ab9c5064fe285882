// The K/V rows of shared KV across nodes as bytes (docs/forward-pass.md, "Shared KV across
// nodes"; docs/http-api.md, the forward body and answer): for each source layer of a node's
// kvRowsIn or kvRowsOut, in that order, its rows of the call's positions, [n, bytesPerToken]
// bytes each, as the engine's cache holds them (per position the K rows of its KV heads, then
// the V rows, in the cache's types: f16 values, or q8_0 / q4_0 blocks). GET /v1/info lists the layers as
// [{"layer", "bytes_per_token"}].
import { LayerfoldError } from '../wasm/capi.js';

/**
 * A node's kvRowsIn or kvRowsOut as /v1/info spells them.
 * @example kvLayersToWire([{ layer: 13, bytesPerToken: 1024 }]) // [{ layer: 13, bytes_per_token: 1024 }]
 */
export function kvLayersToWire(layers = []) {
  return layers.map(({ layer, bytesPerToken }) => ({ layer, bytes_per_token: bytesPerToken }));
}

/**
 * The other way; a missing list is none.
 * @example kvLayersFromWire([{ layer: 13, bytes_per_token: 1024 }]) // [{ layer: 13, bytesPerToken: 1024 }]
 */
export function kvLayersFromWire(layers = []) {
  return layers.map(({ layer, bytes_per_token: bytesPerToken }) => ({ layer, bytesPerToken }));
}

/** The KV cache types, as llama.cpp's --cache-type-k/-v name them (docs/attention.md). */
export const CACHE_TYPES = ['f16', 'q8_0', 'q4_0'];

// Bytes of 32 values in each cache type: 32 f16 values, or one block of 32 whose first two bytes
// are its f16 scale (ggml's block_q8_0, block_q4_0).
const BYTES_PER_32 = { f16: 64, q8_0: 34, q4_0: 18 };
// The f16s of a row in each type: every value, or each block's scale.
const F16_STEP = { f16: 2, q8_0: 34, q4_0: 18 };
const F16_EXPONENT = 0x7c00;

/**
 * The byte offset of the first f16 in one layer's rows (bytes of whole positions of
 * bytesPerToken: the K rows of its KV heads, then the V rows) that is an infinity or a NaN: a
 * value of an f16 row, the scale of a block of a q8_0 / q4_0 row; -1 when there is none.
 * @example firstNonFiniteKvByte(rows[13], 1024, { cacheTypeK: 'q8_0', cacheTypeV: 'q8_0' }) // -1
 */
export function firstNonFiniteKvByte(bytes, bytesPerToken, { cacheTypeK = 'f16', cacheTypeV = 'f16' } = {}) {
  // K's share of a position: its blocks of 32 values are as many as V's.
  const kBytes = bytesPerToken / (BYTES_PER_32[cacheTypeK] + BYTES_PER_32[cacheTypeV]) * BYTES_PER_32[cacheTypeK];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let position = 0; position + bytesPerToken <= bytes.byteLength; position += bytesPerToken) {
    for (const [from, to, step] of [[0, kBytes, F16_STEP[cacheTypeK]], [kBytes, bytesPerToken, F16_STEP[cacheTypeV]]]) {
      for (let at = position + from; at < position + to; at += step) {
        if ((view.getUint16(at, true) & F16_EXPONENT) === F16_EXPONENT) return at;
      }
    }
  }
  return -1;
}

/** Bytes per position of the layers' rows: bytesPerToken summed. */
export function kvRowBytes(layers) {
  return layers.reduce((sum, { bytesPerToken }) => sum + bytesPerToken, 0);
}

/**
 * { [layer]: Uint8Array } -> one Uint8Array of the layers' rows of n positions in order;
 * throws naming a layer whose rows are missing or of another size.
 * @example const bytes = packKvRows([{ layer: 13, bytesPerToken: 1024 }], { 13: rows }, 5);
 */
export function packKvRows(layers, kvRows, n) {
  const out = new Uint8Array(n * kvRowBytes(layers));
  let at = 0;
  for (const { layer, bytesPerToken } of layers) {
    const values = kvRows?.[layer];
    if (!values) throw new LayerfoldError('invalid_argument', `layer ${layer}'s K/V rows are missing`);
    if (values.byteLength !== n * bytesPerToken) {
      throw new LayerfoldError('invalid_argument', `layer ${layer}'s K/V rows hold ${values.byteLength} bytes, expected ${n} positions x ${bytesPerToken}`);
    }
    out.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), at);
    at += values.byteLength;
  }
  return out;
}

/**
 * The other way: bytes of n positions' rows of `layers` -> { [layer]: Uint8Array }, copied.
 * @example const kvRows = unpackKvRows([{ layer: 13, bytesPerToken: 1024 }], bytes, 5);
 */
export function unpackKvRows(layers, bytes, n) {
  const rows = {};
  let at = 0;
  for (const { layer, bytesPerToken } of layers) {
    rows[layer] = bytes.slice(at, at + n * bytesPerToken);
    at += n * bytesPerToken;
  }
  return rows;
}
