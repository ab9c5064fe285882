// A per-layer inputs call's bodies (POST /v1/per-layer-inputs in docs/http-api.md): the request,
// rows that stand for no token (a media item's soft tokens) as hidden states [n, n_embd] f32;
// the answer, every layer's per-layer inputs of them [n_layer, n, n_embd_per_layer] f32, laid out
// as the part of an embed answer after its hidden states (embed_body.js). Little-endian, row-major.
import { LayerfoldError } from '../wasm/capi.js';

const F32 = 4;

/**
 * Bytes of every layer's per-layer inputs of n rows.
 * @example perLayerInputsBytes({ nLayer: 35, nEmbdPerLayer: 256 }, 2) // 71680
 */
export function perLayerInputsBytes({ nLayer, nEmbdPerLayer = 0 }, n) {
  return n * nLayer * nEmbdPerLayer * F32;
}

/**
 * The answer: an ArrayBuffer of exactly perLayerInputsBytes() -> Float32Array [nLayer, n,
 * nEmbdPerLayer], a view of it; 'bad_length' when it is not that long.
 * @example const perLayer = decodePerLayerInputsAnswer(buffer, { nLayer: 35, nEmbdPerLayer: 256 }, 2);
 */
export function decodePerLayerInputsAnswer(buffer, shape, n) {
  const bytes = perLayerInputsBytes(shape, n);
  if (buffer.byteLength !== bytes) {
    throw new LayerfoldError('bad_length', `per-layer inputs of ${buffer.byteLength} bytes, expected ${bytes} (n_layer ${shape.nLayer} · ${n} rows · n_embd_per_layer ${shape.nEmbdPerLayer} float32)`);
  }
  return new Float32Array(buffer);
}
