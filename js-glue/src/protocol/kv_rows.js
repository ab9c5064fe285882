// The K/V rows of shared KV across nodes as bytes (docs/forward-pass.md, "Shared KV across
// nodes"; docs/http-api.md, the forward body and answer): for each source layer of a node's
// kvRowsIn or kvRowsOut, in that order, its rows of the call's positions, [n, bytesPerToken / 2]
// f16 values each, as the engine's cache holds them. GET /v1/info lists the layers as
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

/** Bytes per position of the layers' rows: bytesPerToken summed. */
export function kvRowBytes(layers) {
  return layers.reduce((sum, { bytesPerToken }) => sum + bytesPerToken, 0);
}

/**
 * { [layer]: Uint16Array } -> one Uint8Array of the layers' rows of n positions in order;
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
 * The other way: bytes of n positions' rows of `layers` -> { [layer]: Uint16Array }, copied.
 * @example const kvRows = unpackKvRows([{ layer: 13, bytesPerToken: 1024 }], bytes, 5);
 */
export function unpackKvRows(layers, bytes, n) {
  const rows = {};
  let at = 0;
  for (const { layer, bytesPerToken } of layers) {
    rows[layer] = new Uint16Array(bytes.slice(at, at + n * bytesPerToken).buffer);
    at += n * bytesPerToken;
  }
  return rows;
}
