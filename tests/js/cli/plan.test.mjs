// `layerfold plan` without --max-context counts a node's weights as the engine answers for the
// node (lf_node_needs_json), on every preset make-model has: the ranges it prints hold exactly
// the tensor bytes the engine loads for them (rope_freqs where a layer uses them, no K/V of a
// shared-KV layer, a tied head's embedding once), plus the first node's cache of per-layer
// embedding rows where the model has them.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {describe, test} from "node:test";

import {withModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {model, modelWithDrafter, presetHeader, presetNames, root} from "../support/models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");
// plan's default cache of per_layer_token_embd rows on the first node.
const ROW_CACHE = 8 * 2 ** 20;

function plan(file, nodes) {
  const r = spawnSync(process.execPath, [cli, "plan", file, "--nodes", String(nodes), "--json"], {encoding: "utf8"});
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// The engine's weight bytes of a node of layers [begin, end) in a model of n layers, with the
// first node's cache of rows in place of the per-layer embedding table.
function engineWeights(lf, gguf, info, begin, end) {
  const n = info.n_layer;
  const byRows = begin === 0 && info.n_embd_per_layer > 0;
  const needs = lf.json(lf.fn.lf_node_needs_json(gguf, begin, end, begin === 0 ? 1 : 0, end === n ? 1 : 0, 0, 1, byRows ? 1 : 0, 0, 0, 0));
  if (!byRows) return needs.tensor_bytes;
  const rowBytes = needs.per_layer_row_bytes;
  return needs.tensor_bytes + Math.min(Math.floor(ROW_CACHE / rowBytes), info.n_vocab) * rowBytes;
}

describe("plan without --max-context agrees with the engine's node_needs", () => {
  for (const preset of presetNames()) {
    test(`preset ${preset}: one node, two, and one node per layer`, async () => {
      const file = presetHeader(preset);
      // Every range plan could print, asked of the engine while the header is open.
      const {info, answers} = await withModelHeader(file, {}, (lf, gguf, header) => {
        const table = new Map();
        for (let b = 0; b < header.info.n_layer; b++) {
          for (let e = b + 1; e <= header.info.n_layer; e++) table.set(`${b}-${e - 1}`, engineWeights(lf, gguf, header.info, b, e));
        }
        return {info: header.info, answers: table};
      });
      for (const k of new Set([1, Math.min(2, info.n_layer), info.n_layer])) {
        const out = plan(file, k);
        assert.equal(out.counts, "weights");
        assert.deepEqual(out.nodes.map((nd) => nd.layers).flatMap(([a, b]) => Array.from({length: b - a + 1}, (_, i) => a + i)),
          Array.from({length: info.n_layer}, (_, i) => i), `--nodes ${k}: the ranges cover every layer once, in order`);
        for (const nd of out.nodes) {
          assert.equal(nd.bytes, answers.get(`${nd.layers[0]}-${nd.layers[1]}`), `--nodes ${k}, layers ${nd.layers[0]}-${nd.layers[1]}`);
        }
      }
    });
  }
});

describe("plan --max-context: how many tokens fit each node", () => {
  const run = (file, args) => {
    const r = spawnSync(process.execPath, [cli, "plan", file, "--nodes", "1", "--json", ...args], {encoding: "utf8"});
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  // One node's whole memory at a context, as plan counts it.
  const bytesAt = (file, context, types = []) => run(file, ["--max-context", String(context), "--memory", String(2 ** 40), ...types]).nodes[0].bytes;

  test("the longest context whose memory is within the budget, for each cache type", () => {
    const file = model("small-q4", "small", ["--type", "Q4_0"]);
    const budget = bytesAt(file, 300);
    const fits = {};
    for (const [name, types] of [["f16", []], ["q8_0", ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]], ["q4_0", ["--cache-type-k", "q4_0", "--cache-type-v", "q4_0"]]]) {
      const out = run(file, ["--max-context", "64", "--memory", String(budget), ...types]);
      assert.equal(out.counts, "memory");
      assert.equal(out.cache_type_k, name);
      fits[name] = out.nodes[0].fits_context;
      assert.ok(bytesAt(file, fits[name], types) <= budget, `${name}: ${fits[name]} tokens fit`);
      if (fits[name] < 1024) assert.ok(bytesAt(file, fits[name] + 1, types) > budget, `${name}: ${fits[name] + 1} tokens do not`);
    }
    assert.equal(fits.f16, 300);
    assert.ok(fits.q8_0 > fits.f16 && fits.q4_0 >= fits.q8_0, JSON.stringify(fits));
  });

  test("a node that cannot hold one token fits 0", () => {
    const file = model("small-q4", "small", ["--type", "Q4_0"]);
    const r = spawnSync(process.execPath, [cli, "plan", file, "--nodes", "1", "--json", "--max-context", "16", "--memory", "1000"], {encoding: "utf8"});
    assert.equal(r.status, 1);
    assert.equal(JSON.parse(r.stdout).nodes[0].fits_context, 0);
  });
});

describe("plan with a draft model", () => {
  // gemma4, layers SSG: the drafter reads the caches of layers 1 (its sliding layers) and 2.
  const pair = () => modelWithDrafter("mtp-plan", "tiny", ["--n-layer", "3", "--swa-pattern", "SSG", "--type", "Q4_0"]);
  const run = (file, nodes, more = []) => spawnSync(process.execPath, [cli, "plan", file, "--nodes", String(nodes), "--json", ...more], {encoding: "utf8"});

  test("the last node serves the layers the drafter reads and counts its bytes; more nodes are refused naming them", () => {
    const {target, drafter} = pair();
    const r = run(target, 2, ["--draft-model", drafter]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).spec, "local:0-0,local:1-2");
    // One node: the same layers, and the drafter's tensors (its file less its header) beside them.
    const alone = JSON.parse(run(target, 1).stdout).nodes[0].bytes;
    const withDrafter = JSON.parse(run(target, 1, ["--draft-model", drafter]).stdout).nodes[0].bytes;
    assert.ok(withDrafter - alone > 0 && withDrafter - alone < fs.statSync(drafter).size,
      `${withDrafter - alone} bytes of a ${fs.statSync(drafter).size}-byte drafter file`);
    const refused = run(target, 3, ["--draft-model", drafter]);
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /3 nodes: the draft model reads the caches of layers 1 and 2, which the last node must hold \(layers 1-2 at least\), so at most 2 nodes/);
  });
});
