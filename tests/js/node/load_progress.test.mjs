// LayerNode.open's onProgress measures the node's own load: the bytes of the tensors it reads,
// not the whole file nor the header it reads first, so on a load split over three nodes each
// node's reports climb to exactly 100% of its own bytes and never past it.
import assert from "node:assert/strict";
import fs from "node:fs";
import {test} from "node:test";

import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model} from "../support/models.mjs";

const NODES = [[0, 2], [2, 4], [4, 6]];

test("three nodes of a six-layer model: each node's reports end at 100% of the bytes it loaded, never above", async () => {
  const file = model("small-q8", "small", ["--type", "Q8_0"]);
  const size = fs.statSync(file).size;
  const header = await readModelHeader(file);
  const bytesOf = (name) => header.tensors.find((t) => t.name === name)?.n_bytes ?? 0;
  // Every tensor once, and the token embedding again on the last node when the head is tied to it.
  const tied = bytesOf("output.weight") === 0;
  const expected = header.tensors.reduce((sum, t) => sum + t.n_bytes, 0) + (tied ? bytesOf("token_embd.weight") : 0);
  let loaded = 0;
  for (const layers of NODES) {
    const reports = [];
    // From the path: the node reads the header itself before its tensors.
    const node = await LayerNode.open({model: file, layers, build: "single", onProgress: (p) => reports.push(p)});
    try {
      assert.ok(reports.length > 0, `no report for layers ${layers}`);
      const total = reports[0].totalBytes;
      for (const p of reports) {
        assert.equal(p.totalBytes, total, "the total changed during the load");
        assert.ok(p.bytes <= p.totalBytes, `${p.bytes} of ${p.totalBytes}: above 100%`);
      }
      const last = reports.at(-1);
      assert.equal(last.bytes, last.totalBytes, `layers ${layers} ended at ${last.bytes} of ${last.totalBytes}`);
      assert.equal(last.etaSeconds, 0);
      assert.equal(total, node.info().bytesLoaded);
      assert.ok(total < size / 2, `layers ${layers}: ${total} bytes of a ${size}-byte file`);
      loaded += total;
    } finally {
      node.close();
    }
  }
  assert.equal(loaded, expected);
});
