// Gemma 4 E2B/E4B-shaped models in a pipeline: the per-layer inputs made on the first node travel
// with the hidden states, and a node holding shared-KV layers without their source mirrors the
// source's cache from the K/V rows the source's node hands out (docs/forward-pass.md, "Shared KV
// across nodes"); in process, over HTTP, through replays and cuts, every split gives the bytes
// of one node, and `layerfold plan` splits anywhere.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model, root} from "../support/models.mjs";
import {startServer, waitReady} from "../support/server_process.mjs";

// Layers SSGSG; layer 3 reads layer 1's cache, layer 4 layer 2's.
const sharedKv2 = () => model("tiny-shared-kv2-q8", "tiny-shared-kv2", ["--type", "Q8_0"]);
const argmax = (logits) => logits.reduce((best, x, i) => (x > logits[best] ? i : best), 0);
const cli = path.join(root, "js-glue", "bin", "layerfold.js");
const bytes = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

// A prompt longer than the window of 4, then greedy steps: each step's logits.
async function greedyLogits(pipeline, steps = 4, session = "chat", tokens = [2, 17, 300, 5, 41, 88, 9, 120]) {
  const out = [];
  for (let s = 0; s < steps; s++) {
    const {logits} = await pipeline.step(session, tokens);
    out.push(bytes(logits));
    tokens = [argmax(logits)];
  }
  return out;
}

function assertSame(got, expected, what) {
  assert.equal(got.length, expected.length, what);
  for (const [i, e] of expected.entries()) assert.ok(got[i].equals(e), `${what}: step ${i}: logits differ`);
}

// Splits with the shared layers on another node than their sources (1 for 3, 2 for 4).
const SHIPPED = ["local:0-2,local:3-4", "local:0-3,local:4-4", "local:0-1,local:2-2,local:3-4", "local:0-0,local:1-3,local:4-4"];

describe("E-model pipelines", () => {
  test("in process: splits that keep shared layers with their source or ship the sources' K/V rows equal one node, bit for bit", async () => {
    const whole = await Pipeline.open({model: sharedKv2(), build: "single"});
    try {
      const expected = await greedyLogits(whole);
      for (const nodes of ["local:0-0,local:1-4", ...SHIPPED]) {
        const split = await Pipeline.open({model: sharedKv2(), nodes, build: "single"});
        try {
          assertSame(await greedyLogits(split), expected, nodes);
        } finally {
          await split.close();
        }
      }
    } finally {
      await whole.close();
    }
  });

  test("nodes that lose the session are replayed with the K/V rows they were sent; a cut keeps the mirror consistent", async () => {
    const prompts = [[2, 17, 300, 5, 41, 88, 9, 120], [2, 44, 45, 46, 47, 48]];
    const whole = await Pipeline.open({model: sharedKv2(), build: "single"});
    const cramped = await Pipeline.open({model: sharedKv2(), nodes: "local:0-2,local:3-4", build: "single", maxSessions: 1});
    const split = await Pipeline.open({model: sharedKv2(), nodes: "local:0-1,local:2-2,local:3-4", build: "single"});
    try {
      for (const [i, tokens] of prompts.entries()) {
        const expected = await greedyLogits(whole, 3, `s${i}`, tokens);
        // Sessions take turns, so each step on the cramped nodes evicts the other session first.
        const got = [];
        let next = tokens;
        for (let s = 0; s < 3; s++) {
          const {logits} = await cramped.step(`s${i}`, next);
          got.push(bytes(logits));
          next = [argmax(logits)];
          await cramped.step(`other${i}-${s}`, [2, 9]);
        }
        assertSame(got, expected, `session ${i}`);
      }
      assert.ok(cramped.replays >= 2, `replays: ${cramped.replays}`);

      // Cut back to 5 positions (inside the window-4 rings' reach) and go on with other tokens.
      for (const p of [whole, split]) {
        await p.step("cut", [2, 17, 300, 5, 41, 88, 9, 120]);
        await p.truncate("cut", 5);
      }
      assertSame(await greedyLogits(split, 3, "cut", [61, 62, 63]), await greedyLogits(whole, 3, "cut", [61, 62, 63]), "after the cut");
    } finally {
      await whole.close();
      await cramped.close();
      await split.close();
    }
  });

  test("a node holding shared layers without their source takes and hands out the rows its needs name", async () => {
    const mirror = await LayerNode.open({model: sharedKv2(), layers: [3, 5], build: "single"});
    const source = await LayerNode.open({model: sharedKv2(), layers: [0, 3], build: "single"});
    try {
      // K and V of each position, f16, of the source's KV heads.
      const kvDim = (il) => mirror.modelInfo.layers[il].n_head_kv * mirror.modelInfo.layers[il].head_dim;
      assert.deepEqual(mirror.kvRowsIn, [{layer: 1, bytesPerToken: 2 * 2 * kvDim(1)}, {layer: 2, bytesPerToken: 2 * 2 * kvDim(2)}]);
      assert.deepEqual(mirror.kvRowsOut, []);
      assert.deepEqual(source.kvRowsIn, []);
      assert.deepEqual(source.kvRowsOut, mirror.kvRowsIn);
      const tokens = [2, 17, 300];
      const hidden = source.embed(tokens);
      const perLayer = await source.perLayerInputs(tokens, hidden);
      const out = await source.forward({session: "s", startPos: 0, hidden, perLayer: perLayer.subarray(0, 3 * 3 * 32)});
      const kvRows = source.kvRowsOf(out);
      assert.equal(kvRows[1].length, 3 * 2 * 2 * kvDim(1));
      assert.equal(kvRows[2].length, 3 * 2 * 2 * kvDim(2));
      const tail = perLayer.subarray(3 * 3 * 32);
      await assert.rejects(mirror.forward({session: "m", startPos: 0, hidden: out, perLayer: tail}), /layer 1's K\/V rows are missing/);
      await assert.rejects(mirror.forward({session: "m", startPos: 0, hidden: out, perLayer: tail, kvRows: {1: kvRows[1], 2: kvRows[2].subarray(1)}}),
        new RegExp(`layer 2's K/V rows hold ${3 * 2 * 2 * kvDim(2) - 1} bytes, expected n x n_head_kv x \\(K row \\+ V row\\) = ${3 * 2 * 2 * kvDim(2)} \\(K f16, V f16\\)`));
      const nan = Uint8Array.from(kvRows[1]);
      new DataView(nan.buffer).setUint16(2 * (2 * kvDim(1) + 3), 0x7e00, true);
      await assert.rejects(mirror.forward({session: "m", startPos: 0, hidden: out, perLayer: tail, kvRows: {1: nan, 2: kvRows[2]}}),
        /layer 1's K\/V rows hold a non-finite value at position 1/);
      assert.equal(mirror.sessionLength("m"), null);
      const done = await mirror.forward({session: "m", startPos: 0, hidden: out, perLayer: tail, kvRows});
      assert.equal(done.length, 3 * mirror.nEmbd);
      assert.equal(mirror.kvRowsOf(done), null);
    } finally {
      mirror.close();
      source.close();
    }
  });

  test("over HTTP: layer-node servers that ship the K/V rows equal the in-process pipeline, bit for bit", async (t) => {
    const file = sharedKv2();
    const servers = await Promise.all(["0-1", "2-2", "3-4"].map((layers) => startServer(t, {args: ["--model", file, "--layers", layers]})));
    await Promise.all(servers.map((s) => waitReady(s.url)));
    const info = await Promise.all(servers.map(async (s) => (await fetch(`${s.url}/v1/info`)).json()));
    assert.deepEqual(info.map((i) => [i.kv_rows_in.map((l) => l.layer), i.kv_rows_out.map((l) => l.layer)]), [[[], [1]], [[], [2]], [[1, 2], []]]);
    assert.deepEqual(info[2].kv_rows_in, info[0].kv_rows_out.concat(info[1].kv_rows_out));
    const whole = await Pipeline.open({model: file, build: "single"});
    const remote = await Pipeline.open({model: file, nodes: servers.map((s) => s.url).join(",")});
    const mixed = await Pipeline.open({model: file, nodes: `local:0-1,${servers[1].url},local:3-4`, build: "single"});
    try {
      const expected = await greedyLogits(whole);
      assertSame(await greedyLogits(remote), expected, "remote");
      assertSame(await greedyLogits(mixed), expected, "mixed");
      // A body without the rows the node mirrors is refused by its length, naming the layers.
      const hidden = Buffer.alloc(4 * (info[2].n_embd + 2 * 32));
      const r = await fetch(`${servers[2].url}/v1/sessions/x/forward?start_pos=0`, {method: "POST", body: hidden, headers: {"content-type": "application/octet-stream"}});
      assert.equal(r.status, 400);
      assert.match(await r.text(), /K\/V rows of layers 1, 2/);
    } finally {
      await whole.close();
      await remote.close();
      await mixed.close();
    }
  });

  test("plan splits anywhere: shared-KV layers need not stay with their sources", () => {
    const run = (...args) => spawnSync(process.execPath, [cli, "plan", sharedKv2(), ...args], {encoding: "utf8"});
    const r = run("--nodes", "5", "--json");
    assert.equal(r.status, 0, r.stderr);
    const {nodes, counts} = JSON.parse(r.stdout);
    assert.equal(counts, "weights");
    // Balanced by weight: shared layer 4 (double wide) on a node of its own, away from its source 2.
    assert.deepEqual(nodes.map((n) => n.layers), [[0, 0], [1, 3], [4, 4]]);
    // Ranges no node holds become groups, shared-KV layers mirroring their sources' heads.
    const grouped = run("--nodes", "3", "--memory", "100000");
    assert.equal(grouped.status, 0, grouped.stderr);
    assert.match(grouped.stdout, /--nodes tp\(local:0-0\*4\),tp\(local:1-3\*4\),tp\(local:4-4\*2\)/);
    const tight = run("--nodes", "3", "--memory", "4000");
    assert.equal(tight.status, 1);
    assert.match(tight.stderr, /need more than .* use more nodes/);
    const bad = run("--nodes", "2", "--memory", "128MB");
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /--memory must be a number of bytes >= 1, optionally with KiB, MiB or GiB, got "128MB"/);
  });
});
