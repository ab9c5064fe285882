// An encoder node's calls (docs/http-api.md, "Encoding media"): what /v1/info says of the
// projector it serves, the image call's query, and the bodies' sizes. POST /v1/encode/image takes
// an image's decoded pixels, RGB bytes [height, width, 3], rows top down, with width, height and
// max_tokens in the query; POST /v1/encode/audio a clip's samples, little-endian f32 at 16 kHz
// mono; both answer the soft-token rows, little-endian f32 [tokens, n_embd_text], the tokens
// being what the caller counts from the info (image_tokens.js, clip_tokens.js).
import { LayerfoldError } from '../wasm/capi.js';

const F32 = 4;
const RGB = 3;

/** Bytes of an image's body. */
export const imageBodyBytes = (width, height) => width * height * RGB;
/** Bytes of an answer of `tokens` rows. */
export const rowsBytes = (tokens, nEmbdText) => tokens * nEmbdText * F32;

/**
 * The encoder section of /v1/info: the towers' configs (gguf/projector_config.js) and the
 * node's limits, or null for a node without a projector.
 * @example encodeEncoderInfo({ vision, audio: null }, { maxImagePixels: 50e6, maxAudioSeconds: 600 })
 */
export function encodeEncoderInfo(towers, { maxImagePixels, maxAudioSeconds }) {
  if (!towers) return null;
  const { vision: v, audio: a } = towers;
  return {
    vision: { patch_size: v.patchSize, n_merge: v.nMerge, pos_size: v.posSize, min_tokens: v.minTokens, max_tokens: v.maxTokens,
      n_embd_text: v.nEmbdText, max_pixels: maxImagePixels },
    audio: a ? { n_embd_text: a.nEmbdText, max_seconds: maxAudioSeconds } : null,
  };
}

// A positive integer of the section at `path`, below `max`, or 'bad_response' naming it.
function count(section, name, path, max = 2 ** 31) {
  const value = section?.[name];
  if (!(Number.isSafeInteger(value) && value >= 1 && value < max)) {
    throw new LayerfoldError('bad_response', `GET /v1/info: ${path}.${name} is ${JSON.stringify(value)?.slice(0, 40)}, not a positive integer`);
  }
  return value;
}

/**
 * The other way: /v1/info's parsed JSON -> {vision: {patchSize, nMerge, posSize, minTokens,
 * maxTokens, nEmbdText, maxPixels}, audio: {nEmbdText, maxSeconds} | null}; 'unsupported' when the
 * node encodes nothing, 'bad_response' naming a field that is not a size.
 * @example const { vision, audio } = decodeEncoderInfo(await response.json());
 */
export function decodeEncoderInfo(info) {
  const e = info?.encoder;
  if (e === undefined || e === null) throw new LayerfoldError('unsupported', 'GET /v1/info: the node encodes no media (serve --mmproj)');
  const v = e.vision;
  const vision = {
    patchSize: count(v, 'patch_size', 'encoder.vision'), nMerge: count(v, 'n_merge', 'encoder.vision'), posSize: count(v, 'pos_size', 'encoder.vision'),
    minTokens: count(v, 'min_tokens', 'encoder.vision'), maxTokens: count(v, 'max_tokens', 'encoder.vision'),
    nEmbdText: count(v, 'n_embd_text', 'encoder.vision', 1 << 16), maxPixels: count(v, 'max_pixels', 'encoder.vision', 2 ** 53),
  };
  if (vision.minTokens > vision.maxTokens) throw new LayerfoldError('bad_response', 'GET /v1/info: encoder.vision.min_tokens is above its max_tokens');
  const a = e.audio;
  const audio = a === undefined || a === null ? null
    : { nEmbdText: count(a, 'n_embd_text', 'encoder.audio', 1 << 16), maxSeconds: count(a, 'max_seconds', 'encoder.audio') };
  return { vision, audio };
}

/**
 * The image call's query.
 * @example imageQuery({ width: 640, height: 480, maxTokens: 280 }) // 'width=640&height=480&max_tokens=280'
 */
export function imageQuery({ width, height, maxTokens }) {
  return new URLSearchParams({ width: String(width), height: String(height), max_tokens: String(maxTokens) }).toString();
}

// A query value of decimal digits below 2^31, or 'invalid_argument' naming it.
function digits(query, name, fallback) {
  const raw = query[name];
  if (raw === undefined && fallback !== undefined) return fallback;
  if (!/^\d{1,10}$/.test(raw ?? '') || Number(raw) >= 2 ** 31) {
    throw new LayerfoldError('invalid_argument', `${name}=${JSON.stringify(String(raw ?? '(none)').slice(0, 40))}: expected a non-negative integer`);
  }
  return Number(raw);
}

/**
 * The other way: the query's {width, height, max_tokens} (max_tokens 0 or absent: the tower's
 * budget) -> {width, height, maxTokens}; 'invalid_argument' naming a value that is not a count.
 * Their ranges are the tower's to check (vision/image_tokens.js).
 * @example readImageQuery({ width: '640', height: '480' }) // { width: 640, height: 480, maxTokens: 0 }
 */
export function readImageQuery(query) {
  return { width: digits(query, 'width'), height: digits(query, 'height'), maxTokens: digits(query, 'max_tokens', 0) };
}
