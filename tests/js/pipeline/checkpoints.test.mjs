// Pipeline.checkpoint and a cut deeper than the sliding rings allow: every node returns to its
// checkpoint, the next step feeds it the positions from there to the cut again from the
// pipeline's history (an entry split mid-way), and the logits are the bytes of a session fed
// only the positions kept; without a checkpoint before the cut the nodes are rebuilt from the
// start, with the same bytes.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model} from "../support/models.mjs";

// The tiny model: layers [sliding, global], window 4; rings of 4 + 64 - 1 = 67 slots. Node 0 holds
// the sliding layer, node 1 the global one, which any cut leaves exact.
const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const tokens = Array.from({length: 200}, (_, i) => (i * 37 + 11) % 1000 + 5);

const bytes = (x) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);

async function open(t) {
  const pipeline = await Pipeline.open({model: tiny(), nodes: "local:0-0,local:1-1", build: "single"});
  t.after(() => pipeline.close());
  return pipeline;
}

// Steps of 50, 40 and 60 positions, a checkpoint after the first when asked.
async function feed(pipeline, session, checkpointAfterFirst) {
  await pipeline.step(session, tokens.slice(0, 50));
  if (checkpointAfterFirst) assert.deepEqual(await pipeline.checkpoint(session, {keep: 2}), [0, 1]);
  await pipeline.step(session, tokens.slice(50, 90));
  await pipeline.step(session, tokens.slice(90, 150));
}

describe("pipeline checkpoints", () => {
  test("a cut deeper than the rings returns to the checkpoint, and the next step continues with a fresh session's bytes", async (t) => {
    const pipeline = await open(t);
    await feed(pipeline, "a", true);
    // 150 - 67 + 3 = 86 is the shortest cut in place; 70 lies inside the second step's entry.
    const cut = await pipeline.truncate("a", 70);
    assert.deepEqual(cut, {nPast: 70, rebuilt: []});
    const lengths = pipeline.nodes.map((node) => node.sessionLength([...node.sessions()].find((id) => id.startsWith("s-"))));
    assert.deepEqual(lengths, [50, 70], "the sliding layer's node returned to its checkpoint; the global layer's cut in place");
    const next = tokens.slice(150, 156);
    const starts = [];
    const forward = pipeline.nodes[0].forward.bind(pipeline.nodes[0]);
    pipeline.nodes[0].forward = (call) => {
      starts.push(call.startPos);
      return forward(call);
    };
    const continued = (await pipeline.step("a", next)).logits;
    assert.deepEqual(starts, [50, 70], "node 0 was fed 50..70 again from the checkpoint, then the step");
    await pipeline.step("fresh", tokens.slice(0, 70));
    const fresh = (await pipeline.step("fresh", next)).logits;
    assert.ok(bytes(continued).equals(bytes(fresh)), "the continuation's logits differ from a fresh session's");
  });

  test("without a checkpoint before the cut the nodes are rebuilt from the start, with the same bytes", async (t) => {
    const pipeline = await open(t);
    await feed(pipeline, "b", false);
    assert.deepEqual(await pipeline.truncate("b", 70), {nPast: 70, rebuilt: [0]});
    const next = tokens.slice(150, 156);
    const continued = (await pipeline.step("b", next)).logits;
    await pipeline.step("fresh", tokens.slice(0, 70));
    assert.ok(bytes(continued).equals(bytes((await pipeline.step("fresh", next)).logits)), "the continuation's logits differ from a fresh session's");
  });

  test("a checkpoint of an unknown session is refused by name", async (t) => {
    const pipeline = await open(t);
    await assert.rejects(pipeline.checkpoint("nobody"), {code: "unknown_session", message: /nobody/});
    await pipeline.step("c", tokens.slice(0, 5));
    await assert.rejects(pipeline.nodes[0].checkpoint([...pipeline.nodes[0].sessions()][0], {keep: 9}), {code: "invalid_argument", message: /keep/});
  });
});
