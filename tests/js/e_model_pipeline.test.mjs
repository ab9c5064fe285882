// Gemma 4 E2B/E4B-shaped models in a pipeline: the per-layer inputs made on the first node travel
// with the hidden states, in process and over HTTP, and every split gives the bytes of one node;
// a split that would separate a shared-KV layer from the layer whose cache it reads is refused
// by name, by the nodes and by `layerfold plan`.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {Pipeline} from "../../js-glue/src/pipeline/pipeline.js";
import {model, root} from "./models.mjs";
import {startServer, waitReady} from "./server_process.mjs";

// Layers SSGSG; layer 3 reads layer 1's cache, layer 4 layer 2's: only [0, 1) + [1, 5) splits.
const sharedKv2 = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const cli = path.join(root, "js-glue", "bin", "layerfold.js");

// A prompt longer than the window of 4, then greedy steps: each step's logits.
async function greedyLogits(pipeline, steps = 4) {
  const out = [];
  let tokens = [2, 17, 300, 5, 41, 88, 9, 120];
  for (let s = 0; s < steps; s++) {
    const {logits} = await pipeline.step("chat", tokens);
    out.push(Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength));
    tokens = [argmax(logits)];
  }
  return out;
}

describe("E-model pipelines", () => {
  test("in process: a split keeping shared layers with their source equals one node, bit for bit", async () => {
    const whole = await Pipeline.open({model: sharedKv2(), build: "single"});
    const split = await Pipeline.open({model: sharedKv2(), nodes: "local:0-0,local:1-4", build: "single"});
    try {
      const expected = await greedyLogits(whole);
      const got = await greedyLogits(split);
      for (const [i, e] of expected.entries()) assert.ok(got[i].equals(e), `step ${i}: logits differ`);
    } finally {
      await whole.close();
      await split.close();
    }
  });

  test("a node holding a shared-KV layer but not its source is refused, naming both layers", async () => {
    for (const [nodes, pair] of [["local:0-2,local:3-4", "layers 1 and 3"], ["local:0-3,local:4-4", "layers 2 and 4"]]) {
      await assert.rejects(Pipeline.open({model: sharedKv2(), nodes, build: "single"}),
        new RegExp(`${pair} must stay on one node`), nodes);
    }
  });

  test("over HTTP: two layer-node servers equal the in-process pipeline, bit for bit", async (t) => {
    const file = sharedKv2();
    const servers = await Promise.all(["0-0", "1-4"].map((layers) => startServer(t, {args: ["--model", file, "--layers", layers]})));
    await Promise.all(servers.map((s) => waitReady(s.url)));
    const whole = await Pipeline.open({model: file, build: "single"});
    const remote = await Pipeline.open({model: file, nodes: servers.map((s) => s.url).join(",")});
    try {
      const expected = await greedyLogits(whole);
      const got = await greedyLogits(remote);
      for (const [i, e] of expected.entries()) assert.ok(got[i].equals(e), `step ${i}: logits differ`);
    } finally {
      await whole.close();
      await remote.close();
    }
  });

  test("plan keeps the shared-KV layers with their sources", () => {
    const run = (...args) => spawnSync(process.execPath, [cli, "plan", sharedKv2(), ...args], {encoding: "utf8"});
    const r = run("--nodes", "3", "--json");
    assert.equal(r.status, 0, r.stderr);
    const {nodes} = JSON.parse(r.stdout);
    for (const {layers: [first, last]} of nodes) {
      // A node may start at layer 0 or 1 only; never at 2, 3 or 4.
      assert.ok(first <= 1, `a node starts at layer ${first}: ${r.stdout}`);
      assert.ok(last >= first);
    }
    assert.deepEqual(nodes.map((n) => n.layers), [[0, 0], [1, 4]]);
    const tight = run("--nodes", "3", "--memory", "100000");
    assert.equal(tight.status, 1);
    assert.match(tight.stderr, /layers 1-4 must stay on one node/);
    assert.equal(run("--nodes", "2", "--memory", "1MiB").status, 0);
    const bad = run("--nodes", "2", "--memory", "128MB");
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /--memory must be a positive number of bytes, optionally with KiB, MiB or GiB, not "128MB"/);
  });
});
