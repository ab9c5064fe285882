// A forward's bodies (js-glue/src/protocol/forward_body.js, kv_rows.js): what one
// end encodes the other decodes to the same values, and a body of the wrong length is refused
// naming what was expected. Expected values are written out by hand, not taken from the encoder.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {
  decodeForwardAnswer, decodeForwardBody, encodeForwardAnswer, encodeForwardBody, forwardAnswerBytes, forwardRowBytes,
} from "../../../js-glue/src/protocol/forward_body.js";
import {kvLayersFromWire, kvLayersToWire, packKvRows} from "../../../js-glue/src/protocol/kv_rows.js";

const buffer = (bytes) => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
const floats = (n, start) => Float32Array.from({length: n}, (_, i) => start + i / 4);
// n f16 values from `start` on, as the K/V rows' bytes (little-endian)
const halves = (n, start) => new Uint8Array(Uint16Array.from({length: n}, (_, i) => start + i).buffer);

// A node of n_embd 4, two layers of per-layer width 3, mirroring two source layers.
const shape = {
  nEmbd: 4, perLayerFloats: 2 * 3,
  kvRowsIn: [{layer: 5, bytesPerToken: 4}, {layer: 9, bytesPerToken: 8}],
  kvRowsOut: [{layer: 2, bytesPerToken: 6}],
};

describe("the forward request", () => {
  test("hidden states, per-layer inputs and K/V rows come back as they went", () => {
    const n = 3;
    const hidden = floats(n * 4, 1);
    const perLayer = floats(2 * n * 3, -7);
    const kvRows = {5: halves(n * 2, 100), 9: halves(n * 4, 200)};
    const body = encodeForwardBody({hidden, perLayer, kvRows}, shape);
    // 3 rows of (4 + 6) floats and 4 + 8 bytes of K/V rows.
    assert.equal(body.byteLength, 3 * (10 * 4 + 12));
    assert.equal(forwardRowBytes(shape), 52);
    // The floats first, the K/V rows after them in kvRowsIn's order.
    assert.deepEqual(new Float32Array(buffer(body.subarray(0, 16))), Float32Array.of(1, 1.25, 1.5, 1.75));
    assert.deepEqual(new Uint16Array(buffer(body.subarray(120, 124))), Uint16Array.of(100, 101));
    const got = decodeForwardBody(buffer(body), shape);
    assert.equal(got.rows, n);
    assert.deepEqual(got.hidden, hidden);
    assert.deepEqual(got.perLayer, perLayer);
    assert.deepEqual(got.kvRows, kvRows);
  });

  test("a dense node's body is the hidden states alone", () => {
    const hidden = floats(8, 0);
    const body = encodeForwardBody({hidden}, {nEmbd: 4});
    assert.equal(body.byteLength, 32);
    const got = decodeForwardBody(buffer(body), {nEmbd: 4});
    assert.deepEqual(got, {rows: 2, hidden, perLayer: null, kvRows: null});
  });

  test("a body that is not whole rows is refused naming what a row holds", () => {
    for (const bytes of [0, 51, 53, 104 - 2]) {
      assert.throws(() => decodeForwardBody(new ArrayBuffer(bytes), shape), (error) => {
        assert.equal(error.code, "bad_length");
        assert.match(error.message, new RegExp(`body of ${bytes} bytes: expected a positive multiple of 52 bytes`));
        assert.match(error.message, /4 float32 hidden values, then 6 float32 per-layer inputs, then 12 bytes of the K\/V rows of layers 5, 9/);
        return true;
      });
    }
    assert.throws(() => decodeForwardBody(new ArrayBuffer(6), {nEmbd: 4}), /body of 6 bytes: expected a positive multiple of 16 bytes \(per row 4 float32 hidden values\)$/);
  });

  test("missing or odd-sized K/V rows are refused naming the layer", () => {
    const hidden = floats(4, 0);
    assert.throws(() => encodeForwardBody({hidden, kvRows: {5: halves(2, 0)}}, shape), /layer 9's K\/V rows are missing/);
    assert.throws(() => packKvRows(shape.kvRowsIn, {5: halves(3, 0), 9: halves(4, 0)}, 1), /layer 5's K\/V rows hold 6 bytes, expected 1 positions x 4/);
  });

  test("/v1/info spells the K/V layers in snake_case, and back", () => {
    const wire = [{layer: 2, bytes_per_token: 6}];
    assert.deepEqual(kvLayersToWire(shape.kvRowsOut), wire);
    assert.deepEqual(kvLayersFromWire(wire), shape.kvRowsOut);
    assert.deepEqual(kvLayersFromWire(undefined), []);
  });
});

describe("the forward answer", () => {
  test("the hidden states, then every position's K/V rows, also with last_only", () => {
    const n = 3;
    const kvRows = {2: halves(n * 3, 40)};
    for (const lastOnly of [false, true]) {
      const hidden = floats((lastOnly ? 1 : n) * 4, 2);
      const body = encodeForwardAnswer(hidden, kvRows, shape, n);
      assert.equal(body.byteLength, (lastOnly ? 16 : 48) + 18);
      assert.equal(forwardAnswerBytes(shape, n, {lastOnly}), body.byteLength);
      const got = decodeForwardAnswer(buffer(body), shape, n, {lastOnly});
      assert.deepEqual(got.hidden, hidden);
      assert.deepEqual(got.kvRows, kvRows);
      // The hidden states own their buffer: the pipeline keeps them, not the K/V bytes.
      assert.equal(got.hidden.buffer.byteLength, hidden.byteLength);
    }
  });

  test("without kvRowsOut the answer is the hidden states as they are", () => {
    const hidden = floats(8, 0);
    assert.equal(encodeForwardAnswer(hidden, null, {nEmbd: 4}, 2), hidden);
    assert.deepEqual(decodeForwardAnswer(buffer(new Uint8Array(hidden.buffer)), {nEmbd: 4}, 2), {hidden, kvRows: null});
  });

  test("an answer of another length is refused", () => {
    assert.throws(() => decodeForwardAnswer(new ArrayBuffer(48), shape, 3), (error) => error.code === "bad_length" && /of 48 bytes, expected 66/.test(error.message));
  });
});
