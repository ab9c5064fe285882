// A LayerNode's KV cache types (cacheTypeK / cacheTypeV: f16, q8_0, q4_0): refused by name when
// unknown, counted in the cache's bytes and the memory estimate, the same output bytes in every
// build and thread count, and shared-KV rows shipped between nodes in the cache's types.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model} from "../support/models.mjs";
import {withNode} from "../support/nodes.mjs";

// tiny: a sliding layer of head dim 32 (2 KV heads) and a global one of 64 (1 KV head).
const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const sharedKv2 = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const prompt = [2, 17, 300, 5, 41, 88, 9, 120, 7, 64];
// Bytes of 32 values: f16, a q8_0 block, a q4_0 block.
const PER_32 = {f16: 64, q8_0: 34, q4_0: 18};

const withTinyNode = (options, fn) => withNode({model: tiny(), build: "single", ...options}, fn);

// The prompt's last hidden row and the session's KV bytes.
async function run(options) {
  return withTinyNode(options, async (node) => {
    const hidden = await node.forward({session: "s", startPos: 0, hidden: node.embed(prompt)});
    const step = await node.forward({session: "s", startPos: prompt.length, hidden: node.embed([33])});
    return {hidden, step, kvBytes: node.info().kvBytes, types: [node.cacheTypeK, node.cacheTypeV]};
  });
}

describe("KV cache types", () => {
  test("an unknown type is refused by name before anything is read", async () => {
    for (const [options, message] of [
      [{cacheTypeK: "q5_1"}, /cacheTypeK "q5_1" is not a supported cache type: expected f16, q8_0, q4_0/],
      [{cacheTypeV: "Q8_0"}, /cacheTypeV "Q8_0" is not a supported cache type: expected f16, q8_0, q4_0/],
    ]) {
      await assert.rejects(LayerNode.open({model: tiny(), build: "single", ...options}), (error) => {
        assert.equal(error.code, "invalid_argument");
        assert.match(error.message, message);
        return true;
      });
    }
  });

  test("the cache holds each type's bytes: f16 values, q8_0 and q4_0 blocks", async () => {
    const f16 = await run({});
    assert.deepEqual(f16.types, ["f16", "f16"]);
    for (const [k, v] of [["q8_0", "q8_0"], ["q4_0", "q4_0"], ["q8_0", "f16"], ["f16", "q4_0"]]) {
      const got = await run({cacheTypeK: k, cacheTypeV: v});
      assert.deepEqual(got.types, [k, v]);
      // K and V take half of an f16 cache each; each shrinks by its type's bytes per 32 values.
      assert.equal(got.kvBytes * 2 * 64, f16.kvBytes * (PER_32[k] + PER_32[v]), `K ${k}, V ${v}`);
      assert.notDeepEqual(got.hidden, f16.hidden);
    }
  });

  test("the memory estimate counts the types", async () => {
    const needs = async (options) => withTinyNode({memoryBudgetBytes: 2 ** 31, maxContext: 512, ...options}, (node) => node.memory.kvCache);
    const f16 = await needs({});
    assert.equal(await needs({cacheTypeK: "q8_0", cacheTypeV: "q8_0"}) * 64, f16 * 34);
    assert.equal(await needs({cacheTypeK: "q4_0", cacheTypeV: "q8_0"}) * 128, f16 * (18 + 34));
  });

  test("the same bytes in both builds and at every thread count", async () => {
    for (const types of [{cacheTypeK: "q8_0", cacheTypeV: "q8_0"}, {cacheTypeK: "q4_0", cacheTypeV: "f16"}]) {
      const single = await run({...types});
      for (const threads of [1, 2, 3]) {
        const threaded = await run({...types, build: "threaded", threads});
        assert.deepEqual(threaded.hidden, single.hidden, `${JSON.stringify(types)}, ${threads} threads: the prompt`);
        assert.deepEqual(threaded.step, single.step, `${JSON.stringify(types)}, ${threads} threads: the decode step`);
      }
    }
  });

  test("a split E-model ships its shared-KV rows in the cache's types and gives the whole model's logits", async () => {
    const types = {cacheTypeK: "q8_0", cacheTypeV: "q4_0"};
    const whole = await Pipeline.open({model: sharedKv2(), nodes: "local:0-4", build: "single", ...types});
    const split = await Pipeline.open({model: sharedKv2(), nodes: "local:0-2,local:3-4", build: "single", ...types});
    try {
      const source = split.nodes[0];
      for (const {layer, bytesPerToken} of source.kvRowsOut) {
        const l = source.modelInfo.layers[layer];
        assert.equal(bytesPerToken, l.n_head_kv * (l.head_dim / 32) * (34 + 18), `layer ${layer}`);
      }
      for (const p of [whole, split]) await p.step("s", prompt);
      const [a, b] = [(await split.step("s", [61])).logits, (await whole.step("s", [61])).logits];
      assert.ok(Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength)));
    } finally {
      await whole.close();
      await split.close();
    }
  });
});
