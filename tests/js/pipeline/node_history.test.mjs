// What a pipeline keeps of what it sent one node for a session (pipeline/node_history.js): the
// entries from a position on, and a cut that keeps the first n positions of every part of an
// entry (its input, its per-layer inputs, its K/V rows) and nothing after them.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {NodeHistory} from "../../../js-glue/src/pipeline/node_history.js";

const WIDTH = 2;   // floats per row of a hidden-state input
const N_PL = 3;    // per-layer input floats per row and layer
const LAYERS = 2;
const KV = 4;      // K/V row values per position

// An entry of `rows` rows starting at position `start`, every value naming its position (and its
// layer and column), so a cut that keeps the wrong rows shows in the values.
function entry(start, rows) {
  const input = Float32Array.from({length: rows * WIDTH}, (_, i) => 100 * (start + Math.floor(i / WIDTH)) + (i % WIDTH));
  const perLayer = new Float32Array(LAYERS * rows * N_PL);
  for (let l = 0; l < LAYERS; l++) {
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < N_PL; c++) perLayer[(l * rows + r) * N_PL + c] = 10000 * l + 100 * (start + r) + c;
    }
  }
  const kv = Uint16Array.from({length: rows * KV}, (_, i) => 100 * (start + Math.floor(i / KV)) + (i % KV));
  return {input, rows, exitState: null, perLayer, kvRows: {5: kv}};
}

// Three steps of 3, 1 and 4 positions, all run by the node.
function history() {
  const h = new NodeHistory();
  h.entries.push(entry(0, 3), entry(3, 1), entry(4, 4));
  h.positions = 8;
  return h;
}

describe("NodeHistory", () => {
  test("counts the positions of its entries and gives those from an entry boundary on", () => {
    const h = history();
    assert.equal(h.available, 8);
    assert.deepEqual(h.entriesFrom(0).map((e) => e.rows), [3, 1, 4]);
    assert.deepEqual(h.entriesFrom(3).map((e) => e.rows), [1, 4]);
    assert.deepEqual(h.entriesFrom(4).map((e) => e.rows), [4]);
    assert.deepEqual(h.entriesFrom(8), []);
    assert.equal(new NodeHistory().available, 0);
  });

  test("a cut inside an entry keeps that entry's first rows of every part, and drops the entries after", () => {
    const h = history();
    h.cut(5, N_PL);
    assert.equal(h.available, 5);
    assert.equal(h.positions, 5);
    assert.deepEqual(h.entries.map((e) => e.rows), [3, 1, 1]);
    const cut = h.entries[2];
    const whole = entry(4, 1);
    assert.deepEqual([...cut.input], [...whole.input]);
    assert.deepEqual([...cut.perLayer], [...whole.perLayer]);
    assert.deepEqual([...cut.kvRows[5]], [...whole.kvRows[5]]);
    assert.deepEqual(h.entries.slice(0, 2), history().entries.slice(0, 2), "the entries before the cut are untouched");
  });

  test("a cut on an entry boundary keeps whole entries; one beyond the positions run keeps them", () => {
    const h = history();
    h.cut(4, N_PL);
    assert.deepEqual(h.entries.map((e) => e.rows), [3, 1]);
    assert.equal(h.positions, 4);
    const ran = history();
    ran.positions = 3;
    ran.cut(6, N_PL);
    assert.deepEqual(ran.entries.map((e) => e.rows), [3, 1, 2]);
    assert.equal(ran.positions, 3, "a cut never adds positions the node has not run");
    const none = history();
    none.cut(0, N_PL);
    assert.deepEqual(none.entries, []);
    assert.equal(none.available, 0);
  });

  test("an entry of token ids without per-layer inputs or K/V rows is cut the same way", () => {
    const h = new NodeHistory();
    h.entries.push({input: [7, 8, 9], rows: 3, exitState: null, perLayer: null, kvRows: null});
    h.cut(2, 0);
    assert.deepEqual(h.entries, [{input: [7, 8], rows: 2, exitState: null, perLayer: null, kvRows: null}]);
  });
});
