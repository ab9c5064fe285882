// The threaded module comes in two variants, SIMD128 and relaxed SIMD (Node 22+), chosen by
// capability: the choice must match the engine, and both must give the same bytes.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../js-glue/src/layer_node.js";
import {relaxedSimdSupported} from "../../js-glue/src/wasm_features.js";
import {loadThreadedModule} from "../../js-glue/src/wasm_module.js";
import {model} from "./models.mjs";

const nodeMajor = Number(process.versions.node.split(".")[0]);
const file = () => model("small-q4", "small", ["--type", "Q4_0"]);

async function run(relaxedSimd) {
  const node = await LayerNode.open({model: file(), lf: await loadThreadedModule({threads: 2, relaxedSimd})});
  try {
    const hidden = await node.forward({session: "s", startPos: 0, hidden: node.embed([2, 100, 101, 102, 103, 104, 105, 106, 107])});
    const decode = await node.forward({session: "s", startPos: 9, hidden: node.embed([108])});
    return {kernels: node.info().kernels, bytes: Buffer.concat([Buffer.from(hidden.buffer), Buffer.from(decode.buffer)])};
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

  test("relaxed SIMD gives the same bytes as SIMD128, prompt and decode", {skip: !relaxedSimdSupported() && "this Node has no relaxed SIMD: scripts/test runs this file under Node 24 too"}, async () => {
    const plain = await run(false);
    const relaxed = await run(true);
    assert.equal(plain.kernels, "wasm-simd128");
    assert.equal(relaxed.kernels, "wasm-relaxed-simd");
    assert.ok(relaxed.bytes.equals(plain.bytes));
  });
});
