// The threaded module comes in two variants, SIMD128 and relaxed SIMD (Node 22+), chosen by
// capability: the choice must match the engine, and both must give the same bytes.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../js-glue/src/node/layer_node.js";
import {relaxedSimdSupported} from "../../js-glue/src/wasm/features.js";
import {loadThreadedModule} from "../../js-glue/src/wasm/load_node.js";
import {model} from "./models.mjs";

const nodeMajor = Number(process.versions.node.split(".")[0]);
const file = () => model("small-q4", "small", ["--type", "Q4_0"]);

// A prompt and a decode step, exact and with the top-K FFN (whose ffn_up runs cut the row strips
// of the relaxed module's layout anywhere), and the read probe's checksum of the weights as laid
// out in memory (row strips in the relaxed module).
async function run(relaxedSimd, threads) {
  const node = await LayerNode.open({model: file(), lf: await loadThreadedModule({threads, relaxedSimd})});
  try {
    const outputs = [];
    for (const approx of [{}, {ffnTopK: 0.3, ffnTopKThreshold: 1}]) {
      const session = `s${outputs.length}`;
      outputs.push(await node.forward({session, startPos: 0, hidden: node.embed([2, 100, 101, 102, 103, 104, 105, 106, 107]), approx}));
      outputs.push(await node.forward({session, startPos: 9, hidden: node.embed([108]), approx}));
    }
    const {checksum} = await node.readProbe();
    return {kernels: node.info().kernels, checksum, bytes: Buffer.concat(outputs.map((o) => Buffer.from(o.buffer)))};
  } finally {
    node.close();
  }
}

describe("threaded module variants", () => {
  test("relaxed SIMD is detected exactly where the engine enables it by default (Node 22+)", () => {
    assert.equal(relaxedSimdSupported(), nodeMajor >= 22);
  });

  test("the default load picks the variant the engine supports", async () => {
    const node = await LayerNode.open({model: file(), build: "threaded", threads: 1});
    try {
      assert.equal(node.info().kernels, relaxedSimdSupported() ? "wasm-relaxed-simd" : "wasm-simd128");
    } finally {
      node.close();
    }
  });

  test("relaxed SIMD gives the same bytes as SIMD128, prompt and decode, exact and top-K, 2 and 3 threads", {skip: !relaxedSimdSupported() && "this Node has no relaxed SIMD: scripts/test runs this file under Node 24 too"}, async () => {
    const plain = await run(false, 2);
    assert.equal(plain.kernels, "wasm-simd128");
    for (const threads of [2, 3]) {
      const relaxed = await run(true, threads);
      assert.equal(relaxed.kernels, "wasm-relaxed-simd");
      assert.ok(relaxed.bytes.equals(plain.bytes), `${threads} threads`);
      assert.equal(relaxed.checksum, plain.checksum, "the weights in row strips hold the file's halfwords");
    }
  });
});
