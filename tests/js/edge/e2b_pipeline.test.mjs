// The edge pipeline: an E2B-shaped model split by `layerfold plan --memory 128MiB` into
// edge nodes that each fit, run as several layer-node workers in one workerd (miniflare), each
// its own isolate under a 128 MiB memory budget, all reading the model from one R2 bucket. The
// split puts the shared-KV layers on another node than their sources, so the sources' K/V rows
// travel between the workers (docs/forward-pass.md, "Shared KV across nodes"). Through them the
// prompt's logits and the greedy tokens (with each step's logits) are the in-process run's, byte
// for byte.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {describe, test} from "node:test";

import {bundleEdgeWorker} from "../../../js-glue/edge/bundle.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {readModelHeader} from "../../../js-glue/src/gguf/model_header.js";
import {model, root} from "../support/models.mjs";

const {Miniflare} = createRequire(path.join(root, "js-glue", "package.json"))("miniflare");
const cli = path.join(root, "js-glue", "bin", "layerfold.js");

// The preset's 7 layers SSSSGSG (real E2B shapes, Q4_0, 186 MB): layers 5 and 6 read the caches
// of 3 and 4.
const e2b = () => model("e2b-shape", "e2b-shape");
const BUDGET = 128 * 2 ** 20;
const MAX_CONTEXT = 64;
const MAX_TOKENS = 16;
const PROMPT = [2, 818, 1024, 77, 5, 1999, 300, 41, 12];
const STEPS = 6;
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const bytes = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

// The prompt's last logits, then STEPS greedy tokens, each step's logits.
async function greedy(pipeline) {
  const logits = [];
  const tokens = [];
  let next = PROMPT;
  for (let s = 0; s <= STEPS; s++) {
    const out = (await pipeline.step("e2b", next)).logits;
    logits.push(bytes(out));
    next = [argmax(out)];
    tokens.push(next[0]);
  }
  return {logits, tokens};
}

describe("an E2B-shaped pipeline of edge nodes", () => {
  test("plan --memory 128MiB splits it into workerd nodes that each fit, and their pipeline equals the in-process run, byte for byte", async (t) => {
    const file = e2b();
    const planned = spawnSync(process.execPath, [cli, "plan", file, "--nodes", "4", "--memory", "128MiB",
      "--max-context", String(MAX_CONTEXT), "--max-tokens", String(MAX_TOKENS), "--json"], {encoding: "utf8"});
    assert.equal(planned.status, 0, planned.stderr);
    const {nodes} = JSON.parse(planned.stdout);
    const {info} = await readModelHeader(file);
    assert.ok(nodes.length >= 2);
    for (const n of nodes) assert.ok(n.bytes <= BUDGET, `layers ${n.layers}: ${n.bytes} bytes`);
    // Some node holds a shared-KV layer without the layer whose cache it reads.
    assert.ok(nodes.some(({layers: [first, last]}) => info.layers.slice(first, last + 1).some((l) => l.kv_layer < first)),
      JSON.stringify(nodes));

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lf-edge-e2b-"));
    t.after(() => fs.rmSync(dir, {recursive: true, force: true}));
    await bundleEdgeWorker(dir);
    const workers = nodes.map(({layers: [first, last]}, i) => ({
      name: `node${i}`, modules: true, modulesRoot: dir, scriptPath: path.join(dir, "worker.js"),
      modulesRules: [{type: "CompiledWasm", include: ["**/*.wasm"]}], compatibilityDate: "2025-01-01",
      r2Buckets: {MODEL: "model"}, unsafeDirectSockets: [{port: 0}],
      bindings: {MODEL_KEY: "e2b.gguf", LAYERS: `${first}-${last}`, MEMORY_BUDGET_BYTES: String(BUDGET),
        MAX_CONTEXT: String(MAX_CONTEXT), MAX_TOKENS: String(MAX_TOKENS)},
    }));
    const mf = new Miniflare({workers});
    t.after(() => mf.dispose());
    await (await mf.getR2Bucket("MODEL", "node0")).put("e2b.gguf", fs.readFileSync(file));
    const urls = await Promise.all(workers.map(async ({name}) => String(await mf.unsafeGetDirectURL(name)).replace(/\/$/, "")));
    // The first request loads an isolate's weights, busy meanwhile: load them all before the
    // pipeline connects, one at a time, so that on a loaded machine no answer waits for the other
    // isolates' loads too (fetch gives up on an answer after 300 s).
    for (const url of urls) {
      const response = await fetch(`${url}/v1/info`);
      assert.equal(response.status, 200, await response.clone().text());
      await response.body?.cancel();
    }

    const whole = await Pipeline.open({model: file, build: "single"});
    let expected;
    try {
      expected = await greedy(whole);
    } finally {
      await whole.close();
    }
    const edge = await Pipeline.open({model: file, nodes: urls.join(",")});
    try {
      const got = await greedy(edge);
      assert.deepEqual(got.tokens, expected.tokens);
      for (const [s, e] of expected.logits.entries()) assert.ok(got.logits[s].equals(e), `step ${s}: logits differ`);
    } finally {
      await edge.close();
    }
    // Each isolate's WASM memory stayed inside the budget, and the rows went where plan said.
    for (const [i, url] of urls.entries()) {
      const nodeInfo = await (await fetch(`${url}/v1/info`)).json();
      assert.deepEqual(nodeInfo.layers, [nodes[i].layers[0], nodes[i].layers[1] + 1]);
      assert.ok(nodeInfo.wasm_memory_bytes <= BUDGET, `node ${i}: ${nodeInfo.wasm_memory_bytes} bytes of WASM memory`);
    }
  });
});
