// The pipeline asks each node what it can do rather than what class it is
// (js-glue/src/pipeline/pipeline_core.js): a node that keeps its forwards' order (a LayerNode) is
// handed a replay's calls at once, one that does not (a RemoteNode) one call after another; and
// a node is named by its URL when it has one.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {nodeName, PipelineCore} from "../../../js-glue/src/pipeline/pipeline_core.js";
import {RemoteNode} from "../../../js-glue/src/pipeline/remote_node.js";
import {model} from "../support/models.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);

// The node as it is, but saying keepsForwardOrder and counting its forwards in flight.
function watched(node, keepsForwardOrder) {
  const seen = {inFlight: 0, most: 0, calls: 0};
  const forward = async (call) => {
    seen.calls++;
    seen.most = Math.max(seen.most, ++seen.inFlight);
    try {
      return await node.forward(call);
    } finally {
      seen.inFlight--;
    }
  };
  const proxy = new Proxy(node, {
    get(target, key) {
      if (key === "keepsForwardOrder") return keepsForwardOrder;
      if (key === "forward") return forward;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {proxy, seen};
}

describe("a replay's calls, by what the node says of its order", () => {
  for (const keeps of [true, false]) {
    test(`keepsForwardOrder ${keeps}: ${keeps ? "handed over together" : "one after another"}`, async () => {
      // One session per node: session b evicts session a, whose next step is then a replay.
      const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single", maxSessions: 1});
      try {
        const second = watched(pipeline.nodes[1], keeps);
        const core = new PipelineCore([pipeline.nodes[0], second.proxy], pipeline.header, pipeline.tokenizer);
        await core.step("a", [2, 10, 11]);
        await core.step("b", [2, 30]);
        const before = second.seen.calls;
        await core.step("a", [7]);
        assert.equal(core.replays, 2);  // both nodes lost session a
        // The step refused (evicted), then the replayed history and the step again.
        assert.equal(second.seen.calls - before, 3);
        assert.equal(second.seen.most, keeps ? 2 : 1);
      } finally {
        await pipeline.close();
      }
    });
  }

  test("each class says what it does", async () => {
    const pipeline = await Pipeline.open({model: tiny(), build: "single"});
    try {
      assert.equal(pipeline.nodes[0].keepsForwardOrder, true);
    } finally {
      await pipeline.close();
    }
    assert.equal(new RemoteNode("http://127.0.0.1:1", {}).keepsForwardOrder, false);
  });
});

test("a node is named by its URL, or as local", () => {
  assert.equal(nodeName({url: "http://10.0.0.7:8080", layers: [30, 60]}, 1), "node 1 (http://10.0.0.7:8080, layers 30-59)");
  assert.equal(nodeName({layers: [0, 30]}, 0), "node 0 (local, layers 0-29)");
});
