// The memory budget of a layer node (what an edge isolate checks before loading): the KV cache it
// predicts from the GGUF header equals what the engine allocates, the whole estimate covers the
// WASM memory of a forward of max_tokens tokens, and a node over budget is refused before any
// tensor is read, with the bytes needed and available. `layerfold plan --max-context` counts a
// node as that check does (with --draft-model the last node's MTP drafter too), so on an
// E2B-shaped model (35 layers, 20 shared-KV) it splits into nodes that each fit 128 MiB.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {openSource} from "../../../js-glue/src/sources/open_source.js";
import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {model, modelWithDrafter, root} from "../support/models.mjs";

const tiny = () => model("tiny", "tiny", ["--type", "Q4_0"]);
const tinyGemma3 = () => model("tiny-gemma3", "tiny-gemma3");
const small = () => model("small", "small");
const e2b = () => model("e2b-shape", "e2b-shape");
// Gemma 4 E2B's layer count and sharing at the preset's shapes: the header alone, the file sized
// as the whole model (1 GB) without its data, which plan never reads.
const e2b35 = () => model("e2b-shape-35-header", "e2b-shape", ["--n-layer", "35", "--shared-kv-layers", "20", "--header-only"]);
const cli = path.join(root, "js-glue", "bin", "layerfold.js");
const plan = (file, ...args) => {
  const r = spawnSync(process.execPath, [cli, "plan", file, "--json", ...args], {encoding: "utf8"});
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
};

// [model, layers, maxContext]: Gemma 4 (per-layer sliding list, two head dims), Gemma 3 (period),
// middle and last ranges, the model's own context and shorter ones.
const SHAPES = [
  [tiny, [0, 2], 0], [tiny, [1, 2], 100], [tinyGemma3, [0, 3], 0], [tinyGemma3, [1, 2], 70],
  [small, [0, 6], 0], [small, [2, 5], 80],
];
const MAX_TOKENS = 64;

describe("memory budget of a layer node", () => {
  for (const [file, layers, maxContext] of SHAPES) {
    test(`${file.name} layers [${layers}) max context ${maxContext || "of the model"}: KV exact, memory within the estimate`, async () => {
      const node = await LayerNode.open({model: file(), layers, maxContext, build: "single", memoryBudgetBytes: 2 ** 31, maxTokens: MAX_TOKENS});
      try {
        const hidden = Float32Array.from({length: MAX_TOKENS * node.nEmbd}, (_, i) => Math.sin(i * 0.37));
        await node.forward({session: "s", startPos: 0, hidden});
        if (node.withHead) node.logits(hidden);
        assert.equal(node.memory.kvCache, node.sessionBytes("s"));
        assert.equal(node.memory.weights, node.bytesLoaded);
        assert.ok(node.info().wasmMemoryBytes <= node.memory.neededBytes,
          `WASM memory ${node.info().wasmMemoryBytes} above the estimate ${node.memory.neededBytes}`);
        // What the budget leaves beyond one session goes to more sessions.
        assert.equal(node.maxKvBytes, 2 ** 31 - node.memory.neededBytes + node.memory.kvCache);
      } finally {
        node.close();
      }
    });
  }

  test("a node over budget is refused before reading any tensor, naming the bytes; at exactly its need it loads", async () => {
    const probe = await LayerNode.open({model: tiny(), layers: [0, 1], build: "single", memoryBudgetBytes: 2 ** 31, maxTokens: 32});
    const needed = probe.memory.neededBytes;
    probe.close();
    const reads = [];
    const source = await openSource(tiny());
    const counting = {...source, name: source.name, size: source.size, close: () => source.close(),
      read: (s, e) => { reads.push([s, e]); return source.read(s, e); },
      readInto: (s, e, t) => { reads.push([s, e]); return source.readInto(s, e, t); }};
    await assert.rejects(
      LayerNode.open({model: tiny(), source: counting, layers: [0, 1], build: "single", memoryBudgetBytes: needed - 1, maxTokens: 32}),
      (e) => e.code === "over_budget" && e.neededBytes === needed && e.availableBytes === needed - 1 &&
        e.message.includes(`need ${needed} bytes`) && e.message.includes(`budget is ${needed - 1} bytes`));
    // The header is read from byte 0; any tensor read would start further in.
    assert.ok(reads.length > 0 && reads.every(([s]) => s === 0), `only header reads expected, got ${JSON.stringify(reads)}`);
    const node = await LayerNode.open({model: tiny(), layers: [0, 1], build: "single", memoryBudgetBytes: needed, maxTokens: 32});
    node.close();
  });

  test("plan --max-context counts each node as its budget check does, shared-KV mirrors included", async () => {
    const out = plan(e2b(), "--nodes", "3", "--memory", "128MiB", "--max-context", "64", "--max-tokens", "16");
    assert.equal(out.counts, "memory");
    for (const {layers: [first, last], bytes} of out.nodes) {
      const node = await LayerNode.open({model: e2b(), layers: [first, last + 1], build: "single", memoryBudgetBytes: 2 ** 31,
        maxContext: 64, maxTokens: 16});
      try {
        assert.equal(bytes, node.memory.neededBytes, `layers ${first}-${last}`);
      } finally {
        node.close();
      }
    }
  });

  test("plan --draft-model counts the last node as its budget check does, the drafter's tensors, buffers and header included", async () => {
    const {target, drafter} = modelWithDrafter("e2b-shape", "e2b-shape");
    const out = plan(target, "--nodes", "3", "--memory", "128MiB", "--max-context", "64", "--max-tokens", "16", "--draft-model", drafter);
    const {layers: [first, last], bytes} = out.nodes.at(-1);
    const alone = await LayerNode.open({model: target, layers: [first, last + 1], build: "single", memoryBudgetBytes: 2 ** 31, maxContext: 64, maxTokens: 16});
    const node = await LayerNode.open({model: target, draftModel: drafter, layers: [first, last + 1], build: "single", memoryBudgetBytes: 2 ** 31,
      maxContext: 64, maxTokens: 16});
    try {
      assert.equal(bytes, node.memory.neededBytes, `layers ${first}-${last}`);
      assert.ok(node.memory.drafter > 0 && node.memory.neededBytes >= alone.memory.neededBytes + node.memory.drafter);
      assert.ok(node.info().wasmMemoryBytes <= node.memory.neededBytes);
    } finally {
      node.close();
      alone.close();
    }
  });

  test("plan --memory 128MiB splits a 35-layer E2B-shaped model into nodes that each fit, shared-KV layers apart from their sources", async () => {
    const file = e2b35();
    const {info} = await readModelHeader(file);
    assert.equal(info.n_layer, 35);
    assert.deepEqual([info.layers[15].kv_layer, info.layers[19].kv_layer], [13, 14]);
    const out = plan(file, "--nodes", "16", "--memory", "128MiB", "--max-context", "512", "--max-tokens", "64");
    let next = 0;
    for (const {layers: [first, last], bytes} of out.nodes) {
      assert.equal(first, next);
      assert.ok(bytes <= 128 * 2 ** 20, `layers ${first}-${last}: ${bytes} bytes`);
      next = last + 1;
    }
    assert.equal(next, 35);
    // No node holds layers 13 ... 34, and the nodes after layer 14 mirror both sources.
    const late = out.nodes.filter(({layers: [first]}) => first > 14);
    assert.ok(late.length >= 2, JSON.stringify(out.nodes));
    // Counting weights alone, the same budget fits too, in no more nodes.
    const weights = plan(file, "--nodes", "16", "--memory", "128MiB");
    assert.equal(weights.counts, "weights");
    assert.ok(weights.nodes.length <= out.nodes.length);
  });
});
