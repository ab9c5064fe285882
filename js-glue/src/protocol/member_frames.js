// The frames a tensor-parallel group's leader and its members exchange over one WebSocket per
// member (docs/tensor-parallel.md, "Across processes"): a little-endian u32 byte count of a JSON
// header, the header, then float32 payload, after which a frame may carry K/V rows as bytes
// (kvRowsArrays). Encoded and decoded here for both ends.
import { LayerfoldError } from '../wasm/capi.js';

// The largest frame either end takes: a piece or output of a long prompt's rows.
export const MAX_FRAME_BYTES = 1 << 30;
// Where a member serves the WebSocket.
export const MEMBER_PATH = '/v1/member';

/**
 * The options a leader's or member's WebSocket client dials a member with: the bearer token,
 * frames up to MAX_FRAME_BYTES, no compression, and a zero mask. Masking keeps a browser's
 * script from steering a proxy's cache; these clients run no one's script, and unmasking every
 * piece cost a member a good part of its time between phases.
 * @example new WebSocket(url, memberClientOptions(token, 30_000));
 */
export function memberClientOptions(authToken, handshakeTimeout) {
  return {
    headers: authToken ? { authorization: `Bearer ${authToken}` } : {},
    maxPayload: MAX_FRAME_BYTES,
    handshakeTimeout,
    perMessageDeflate: false,
    generateMask: (mask) => mask.fill(0),
  };
}

/**
 * A frame of header (a JSON object) and `arrays` (floats, then any kvRowsArrays), one after
 * another.
 * @example ws.send(encodeFrame({ op: 'begin', session: 'a', startPos: 0, rows: 1, perLayer: 0 }, [hidden]));
 */
export function encodeFrame(header, arrays = []) {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const bytes = arrays.reduce((n, a) => n + a.byteLength, 0);
  const out = new Uint8Array(4 + json.length + bytes);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 4);
  let at = 4 + json.length;
  for (const a of arrays) {
    out.set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), at);
    at += a.byteLength;
  }
  return out;
}

/**
 * A received frame -> {header, payload: Float32Array}; what is not a frame is a bad_frame error
 * naming what is wrong (`from`: whose frame, for the message).
 * @example const { header, payload } = decodeFrame(data, 'member 1');
 */
export function decodeFrame(bytes, from) {
  const bad = (what) => new LayerfoldError('bad_frame', `${from}: ${what}`);
  if (!(bytes instanceof Uint8Array) || bytes.length < 4) throw bad('a frame shorter than its header length');
  const length = new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
  if (4 + length > bytes.length) throw bad(`a header of ${length} bytes in a frame of ${bytes.length}`);
  let header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(4, 4 + length)));
  } catch {
    throw bad('a header that is not JSON');
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header) || typeof header.op !== 'string') {
    throw bad('a header without its op');
  }
  const rest = bytes.length - 4 - length;
  if (rest % 4 !== 0) throw bad(`a payload of ${rest} bytes, not whole floats`);
  // Copied: the payload's offset in the frame need not be a float's.
  const payload = new Float32Array(bytes.slice(4 + length).buffer);
  return { header, payload };
}

/**
 * K/V rows ({ [layer]: Uint8Array }, shared KV across the group's edge) as a frame carries
 * them after its floats: the header's `kv_rows` ([{layer, bytes}]) and the arrays for
 * encodeFrame, each layer's bytes in turn, then zeros to a whole float.
 * @example const kv = kvRowsArrays(rows); ws.send(encodeFrame({ op: 'output', kv_rows: kv.header }, [output, ...kv.arrays]));
 */
export function kvRowsArrays(kvRows = {}) {
  const layers = Object.keys(kvRows).map(Number);
  const arrays = layers.map((layer) => kvRows[layer]);
  const bytes = arrays.reduce((n, a) => n + a.byteLength, 0);
  return { header: layers.map((layer, i) => ({ layer, bytes: arrays[i].byteLength })), arrays: [...arrays, new Uint8Array((4 - (bytes % 4)) % 4)] };
}

/**
 * The K/V rows a frame carries after its first `floats` floats, as header.kv_rows states them
 * -> { [layer]: Uint8Array }; what does not add up is a bad_frame error naming `from`.
 * @example const kvRows = kvRowsIn(header, payload, rows * nEmbd, 'member 1');
 */
export function kvRowsIn(header, payload, floats, from) {
  const list = header.kv_rows ?? [];
  const rest = payload.byteLength - 4 * floats;
  const total = Array.isArray(list) && list.every((l) => isCount(l?.layer) && isCount(l?.bytes)) ? list.reduce((n, l) => n + l.bytes, 0) : -1;
  if (total < 0 || rest < 0 || rest !== total + ((4 - (total % 4)) % 4)) {
    throw new LayerfoldError('bad_frame', `${from}: K/V rows of ${JSON.stringify(list)} in ${Math.max(rest, 0)} bytes after ${floats} floats`);
  }
  const rows = {};
  let at = payload.byteOffset + 4 * floats;
  for (const { layer, bytes } of list) {
    rows[layer] = new Uint8Array(payload.buffer, at, bytes);
    at += bytes;
  }
  return rows;
}

/**
 * Whether n is a count of floats a frame may state (a whole number from 0 up).
 * @example if (!isCount(header.rows)) throw ...
 */
export function isCount(n) {
  return Number.isSafeInteger(n) && n >= 0;
}
