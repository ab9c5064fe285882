// An embed's bodies (js-glue/src/protocol/embed_body.js): the token ids and the hidden states
// with the per-layer inputs go over and come back; a malformed request or an answer of another
// length is refused naming the problem.
import assert from "node:assert/strict";
import {test} from "node:test";

import {
  decodeEmbedAnswer, decodeEmbedRequest, embedAnswerBytes, encodeEmbedAnswer, encodeEmbedRequest,
} from "../../../js-glue/src/protocol/embed_body.js";

const buffer = (bytes) => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
const floats = (n, start) => Float32Array.from({length: n}, (_, i) => start + i / 4);
const limits = {nVocab: 1000, maxTokens: 4};

test("the request: token ids as JSON, and back", () => {
  const body = encodeEmbedRequest(Int32Array.of(2, 818, 999));
  assert.equal(body, '{"tokens":[2,818,999]}');
  assert.deepEqual(decodeEmbedRequest(body, limits), Int32Array.of(2, 818, 999));
});

test("a malformed request is refused naming the problem", () => {
  for (const [text, message] of [
    ["{tokens", 'body is not JSON: expected {"tokens": [id, ...]}'],
    ['{"tokens": []}', '"tokens" must be an array of 1 to 4 token ids'],
    ['{"tokens": [1, 2, 3, 4, 5]}', '"tokens" must be an array of 1 to 4 token ids'],
    ['{"tokens": "2"}', '"tokens" must be an array of 1 to 4 token ids'],
    ['{"tokens": [2, 1000]}', "tokens[1] = 1000: expected an integer from 0 to n_vocab - 1 = 999"],
    ['{"tokens": [-1]}', "tokens[0] = -1: expected an integer from 0 to n_vocab - 1 = 999"],
    ['{"tokens": [2.5]}', "tokens[0] = 2.5: expected an integer from 0 to n_vocab - 1 = 999"],
  ]) {
    assert.throws(() => decodeEmbedRequest(text, limits), (error) => error.code === "invalid_argument" && error.message === message, text);
  }
});

test("the answer: hidden states, then every layer's per-layer inputs", () => {
  const form = {nEmbd: 4, nLayer: 2, nEmbdPerLayer: 3};
  const hidden = floats(2 * 4, 0);
  const perLayer = floats(2 * 2 * 3, 9);
  const body = encodeEmbedAnswer(hidden, perLayer);
  assert.equal(body.byteLength, 4 * (8 + 12));
  assert.equal(embedAnswerBytes(form, 2), 80);
  // The per-layer inputs start right after the hidden states.
  assert.deepEqual(new Float32Array(buffer(body.subarray(32, 36))), Float32Array.of(9));
  const got = decodeEmbedAnswer(buffer(body), form, 2);
  assert.deepEqual(got.hidden, hidden);
  assert.deepEqual(got.perLayer, perLayer);
  assert.deepEqual(decodeEmbedAnswer(buffer(new Uint8Array(hidden.buffer)), {nEmbd: 4, nLayer: 2}, 2), {hidden, perLayer: null});
  assert.throws(() => decodeEmbedAnswer(new ArrayBuffer(32), form, 2), (error) => error.code === "bad_length" && /an embed answer of 32 bytes, expected 80/.test(error.message));
});
