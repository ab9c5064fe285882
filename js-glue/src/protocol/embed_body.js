// An embed's bodies (docs/http-api.md): the request, JSON {"tokens": [id, ...]}; the answer,
// little-endian and row-major, hidden states [n, n_embd] f32, then (a model with per-layer
// embeddings) every layer's per-layer inputs [n_layer, n, n_embd_per_layer] f32.
import { LayerfoldError } from '../wasm/capi.js';
import { asBytes, joined } from './forward_body.js';
import { perLayerInputsBytes } from './per_layer_inputs_body.js';

const F32 = 4;

/**
 * The request's body.
 * @example encodeEmbedRequest([2, 818]) // '{"tokens":[2,818]}'
 */
export function encodeEmbedRequest(tokens) {
  return JSON.stringify({ tokens: Array.from(tokens) });
}

/**
 * The other way: 1 to maxTokens ids in [0, nVocab), else 'invalid_argument' naming the problem.
 * @example decodeEmbedRequest('{"tokens":[2,818]}', { nVocab: 262144, maxTokens: 2048 }) // Int32Array [2, 818]
 */
export function decodeEmbedRequest(text, { nVocab, maxTokens }) {
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new LayerfoldError('invalid_argument', 'body is not JSON: expected {"tokens": [id, ...]}');
  }
  const tokens = body?.tokens;
  if (!Array.isArray(tokens) || tokens.length === 0 || tokens.length > maxTokens) {
    throw new LayerfoldError('invalid_argument', `"tokens" must be an array of 1 to ${maxTokens} token ids`);
  }
  const bad = tokens.findIndex((t) => !Number.isInteger(t) || t < 0 || t >= nVocab);
  if (bad >= 0) throw new LayerfoldError('invalid_argument', `tokens[${bad}] = ${JSON.stringify(tokens[bad])}: expected an integer from 0 to n_vocab - 1 = ${nVocab - 1}`);
  return Int32Array.from(tokens);
}

/**
 * Bytes of the embed answer to n tokens.
 * @example embedAnswerBytes({ nEmbd: 64, nLayer: 6, nEmbdPerLayer: 0 }, 5) // 1280
 */
export function embedAnswerBytes({ nEmbd, nLayer, nEmbdPerLayer = 0 }, n) {
  return n * nEmbd * F32 + perLayerInputsBytes({ nLayer, nEmbdPerLayer }, n);
}

/**
 * The embed answer: hidden [n, nEmbd], then perLayer [nLayer, n, nPl] when the model has them.
 * @example const body = encodeEmbedAnswer(hidden, await node.perLayerInputs(tokens, hidden));
 */
export function encodeEmbedAnswer(hidden, perLayer = null) {
  return perLayer ? joined([asBytes(hidden), asBytes(perLayer)]) : hidden;
}

/**
 * The other way: an ArrayBuffer of exactly embedAnswerBytes() -> { hidden, perLayer (null
 * without) }, views of it; 'bad_length' when it is not.
 * @example const { hidden, perLayer } = decodeEmbedAnswer(buffer, { nEmbd: 64, nLayer: 6, nEmbdPerLayer: 0 }, 5);
 */
export function decodeEmbedAnswer(buffer, shape, n) {
  const bytes = embedAnswerBytes(shape, n);
  if (buffer.byteLength !== bytes) throw new LayerfoldError('bad_length', `an embed answer of ${buffer.byteLength} bytes, expected ${bytes}`);
  const both = new Float32Array(buffer);
  const hiddenFloats = n * shape.nEmbd;
  return { hidden: both.subarray(0, hiddenFloats), perLayer: both.length > hiddenFloats ? both.subarray(hiddenFloats) : null };
}
