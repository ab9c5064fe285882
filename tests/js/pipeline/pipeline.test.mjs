// The coordinator's side of a pipeline: node specs, and the session history it keeps per node
// so that a node that lost a session gets it rebuilt by replay, invisibly to the caller.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {checkCoverage, parseNodesSpec} from "../../../js-glue/src/pipeline/nodes_spec.js";
import {model} from "../support/models.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);

// Greedy continuation of each prompt, steps interleaved across sessions: [session][step] logits.
async function interleaved(pipeline, prompts, steps) {
  const logits = prompts.map(() => []);
  const inputs = [...prompts];
  for (let s = 0; s < steps; s++) {
    for (let i = 0; i < prompts.length; i++) {
      const out = (await pipeline.step(`session ${i}`, inputs[i])).logits;
      logits[i].push(out);
      inputs[i] = [argmax(out)];
    }
  }
  return logits;
}

describe("node specs", () => {
  test("local ranges and URLs, in pipeline order", () => {
    assert.deepEqual(parseNodesSpec("local:0-1, http://10.0.0.7:8080,https://n3.example.com/"), [
      {kind: "local", begin: 0, end: 2},
      {kind: "remote", url: "http://10.0.0.7:8080"},
      {kind: "remote", url: "https://n3.example.com"},
    ]);
  });

  test("malformed entries are refused by name", () => {
    assert.throws(() => parseNodesSpec("local:0-1,remote:2-3"), /bad node "remote:2-3"/);
    assert.throws(() => parseNodesSpec("local:3-1"), /last layer before first/);
    assert.throws(() => parseNodesSpec("http://host:1/v1/forward"), /bad node/);
  });

  test("coverage names the node at a gap or an overlap", () => {
    assert.throws(() => checkCoverage([[0, 2], [3, 6]], 6, ["a", "b"]), /layers 2-2 are served by no node \(gap before b\)/);
    assert.throws(() => checkCoverage([[0, 2], [1, 6]], 6, ["a", "b"]), /layers 1-1 are served by two nodes \(overlap at b\)/);
    assert.throws(() => checkCoverage([[0, 2]], 6, ["a"]), /has 6 layers/);
    assert.doesNotThrow(() => checkCoverage([[0, 2], [2, 6]], 6, ["a", "b"]));
  });
});

describe("session history and replay", () => {
  test("nodes that evict sessions are rebuilt by replay: the same logits, bit for bit, as without eviction", async () => {
    const prompts = [[2, 10, 11, 12], [2, 30, 31], [2, 7]];
    const open = (maxSessions) => Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single", maxSessions});
    const roomy = await open(8);
    const cramped = await open(1);  // every step of another session evicts this one on both nodes
    try {
      const expected = await interleaved(roomy, prompts, 4);
      const got = await interleaved(cramped, prompts, 4);
      assert.equal(roomy.replays, 0);
      assert.ok(cramped.replays >= 2 * prompts.length * 3, `replays: ${cramped.replays}`);
      for (const [i, steps] of expected.entries()) {
        for (const [s, logits] of steps.entries()) {
          assert.deepEqual(Buffer.from(got[i][s].buffer), Buffer.from(logits.buffer), `session ${i}, step ${s}`);
        }
      }
    } finally {
      await roomy.close();
      await cramped.close();
    }
  });

  test("a step with no new tokens is refused; a dropped session starts over", async () => {
    const pipeline = await Pipeline.open({model: tiny(), build: "single"});
    try {
      const first = (await pipeline.step("a", [2, 10, 11])).logits;
      await assert.rejects(pipeline.step("a", []), /no new tokens/);
      await pipeline.dropSession("a");
      assert.deepEqual((await pipeline.step("a", [2, 10, 11])).logits, first);
    } finally {
      await pipeline.close();
    }
  });
});
