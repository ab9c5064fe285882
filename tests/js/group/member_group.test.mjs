// A tensor-parallel group in one process: S members in modules of their own give, call by call,
// the bytes one LayerNode of the same layers gives (a prompt, then decode steps), in both builds,
// for dense gemma4 and gemma3 layers and MoE layers; refusals by name; a refused call leaves
// every member's session as it was.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {MemberGroup} from "../../../js-glue/src/group/member_group.js";
import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {model} from "../support/models.mjs";

const CONFIGS = [
  {name: "tiny", file: () => model("tiny", "tiny", ["--type", "Q4_0"]), layers: [0, 2]},
  {name: "tiny-gemma3, layers 1-2", file: () => model("tiny-gemma3", "tiny-gemma3", ["--type", "Q4_0"]), layers: [1, 3]},
  {name: "moe-tiny", file: () => model("moe-tiny-q8", "moe-tiny", ["--type", "Q8_0"]), layers: [0, 2]},
  // Per-layer inputs, shared-KV layers reading their sources' cache slices, one KV head per layer.
  {name: "tiny-shared-kv2", file: () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]), layers: [0, 5]},
];
const PROMPT = [2, 17, 300, 5, 41, 88, 9];
const DECODE = [33, 250];

const bytesOf = (floats) => Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);

// The calls of the prompt and decode tokens (their embeddings, and the range's per-layer inputs
// on a model with them), and one node's outputs for them.
async function reference(file, [begin, end], build) {
  const embedder = await LayerNode.open({model: file, layers: [0, 1], build: "single"});
  const inputs = [];
  for (const tokens of [PROMPT, ...DECODE.map((t) => [t])]) {
    const hidden = embedder.embed(tokens);
    const nPl = embedder.nEmbdPerLayer;
    const perLayer = nPl ? (await embedder.perLayerInputs(tokens, hidden)).slice(begin * tokens.length * nPl, end * tokens.length * nPl) : null;
    inputs.push({hidden, perLayer});
  }
  embedder.close();
  const node = await LayerNode.open({model: file, layers: [begin, end], build, threads: 2});
  try {
    const outputs = [];
    let pos = 0;
    for (const input of inputs) {
      outputs.push(await node.forward({session: "s", startPos: pos, ...input}));
      pos += input.hidden.length / node.nEmbd;
    }
    return {inputs, outputs, nEmbd: node.nEmbd};
  } finally {
    node.close();
  }
}

describe("a group of members gives one node's bytes", () => {
  for (const config of CONFIGS) {
    for (const build of ["single", "threaded"]) {
      test(`${config.name}, ${build}`, {timeout: 300_000}, async () => {
        const file = config.file();
        const {inputs, outputs, nEmbd} = await reference(file, config.layers, build);
        for (const members of [1, 2, 3]) {
          const group = await MemberGroup.open({model: file, layers: config.layers, members, build, threads: build === "threaded" ? 2 : 1, maxContext: 64});
          try {
            let pos = 0;
            inputs.forEach((input, i) => {
              const out = group.forward({session: "s", startPos: pos, ...input});
              assert.ok(bytesOf(out).equals(bytesOf(outputs[i])), `${members} members, call ${i}: the node's bytes`);
              pos += input.hidden.length / nEmbd;
            });
            assert.equal(group.sessionLength("s"), pos);
            if (members > 1) assert.ok(Math.max(...group.weightBytes) < 0.8 * group.weightBytes.reduce((a, b) => a + b), "each member holds a share");
          } finally {
            group.close();
          }
        }
      });
    }
  }
});

describe("refusals", () => {
  test("a member count that is not a whole number, a split of a shared-KV layer without its source", async () => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    await assert.rejects(MemberGroup.open({model: file, layers: [0, 2], members: 0, build: "single"}),
      (e) => e.code === "invalid_argument" && /members must be a whole number >= 1, not 0/.test(e.message));
    const shared = model("tiny-shared-kv1", "tiny-shared-kv1", ["--type", "Q4_0"]);
    await assert.rejects(MemberGroup.open({model: shared, layers: [3, 4], members: 2, build: "single"}),
      (e) => /layer 3/.test(e.message) && /layer 2/.test(e.message));
  });

  test("a call at the wrong position or with a non-finite row is refused and leaves every member's session as it was", async () => {
    const file = model("tiny", "tiny", ["--type", "Q4_0"]);
    const {inputs, outputs} = await reference(file, [0, 2], "single");
    const group = await MemberGroup.open({model: file, layers: [0, 2], members: 2, build: "single", maxContext: 64});
    try {
      group.forward({session: "s", startPos: 0, hidden: inputs[0].hidden});
      assert.throws(() => group.forward({session: "s", startPos: 3, hidden: inputs[1].hidden}), (e) => e.code === "failed_precondition" || e.code === "invalid_argument");
      const bad = Float32Array.from(inputs[1].hidden);
      bad[5] = NaN;
      assert.throws(() => group.forward({session: "s", startPos: PROMPT.length, hidden: bad}), (e) => /finite/.test(e.message));
      assert.equal(group.sessionLength("s"), PROMPT.length);
      const out = group.forward({session: "s", startPos: PROMPT.length, hidden: inputs[1].hidden});
      assert.ok(bytesOf(out).equals(bytesOf(outputs[1])));
      assert.throws(() => group.forward({session: "s", startPos: 0, hidden: new Float32Array(5)}), RangeError);
    } finally {
      group.close();
    }
  });
});
