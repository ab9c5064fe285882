// A per-layer inputs call's answer (js-glue/src/protocol/per_layer_inputs_body.js): every layer's
// inputs of the rows, of exactly the size the rows and the model give, laid out as an embed
// answer's after its hidden states; an answer of another length is refused naming the sizes.
import assert from "node:assert/strict";
import {test} from "node:test";

import {decodeEmbedAnswer, encodeEmbedAnswer} from "../../../js-glue/src/protocol/embed_body.js";
import {decodePerLayerInputsAnswer, perLayerInputsBytes} from "../../../js-glue/src/protocol/per_layer_inputs_body.js";

const shape = {nLayer: 3, nEmbdPerLayer: 5};
const floats = (n, start) => Float32Array.from({length: n}, (_, i) => start + i / 8);
const buffer = (a) => a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength);

test("the answer is n_layer · n · n_embd_per_layer float32, as an embed answer's per-layer part", () => {
  assert.equal(perLayerInputsBytes(shape, 2), 3 * 2 * 5 * 4);
  assert.equal(perLayerInputsBytes({nLayer: 35, nEmbdPerLayer: 256}, 1), 35840);
  assert.equal(perLayerInputsBytes({nLayer: 3}, 2), 0, "a model without per-layer embeddings has none");
  const perLayer = floats(3 * 2 * 5, 7);
  assert.deepEqual(decodePerLayerInputsAnswer(buffer(perLayer), shape, 2), perLayer);
  // The same bytes an embed of two tokens carries after its hidden states [2, 4].
  const embedded = encodeEmbedAnswer(floats(2 * 4, 0), perLayer);
  assert.deepEqual(decodeEmbedAnswer(buffer(embedded), {nEmbd: 4, ...shape}, 2).perLayer, perLayer);
});

test("an answer of another length is refused, naming what was expected", () => {
  for (const bytes of [0, 4, 3 * 2 * 5 * 4 - 4, 3 * 2 * 5 * 4 + 4, 3 * 1 * 5 * 4]) {
    assert.throws(() => decodePerLayerInputsAnswer(new ArrayBuffer(bytes), shape, 2),
      (error) => error.code === "bad_length" && error.message === `per-layer inputs of ${bytes} bytes, expected 120 (n_layer 3 · 2 rows · n_embd_per_layer 5 float32)`,
      `${bytes} bytes`);
  }
});
