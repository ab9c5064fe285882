// `layerfold validate` / `inspect` as a user runs them: exit status, output, one-line errors.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import path from "node:path";
import {describe, test} from "node:test";

import {model, root} from "./models.mjs";

const cli = path.join(root, "js-glue", "bin", "layerfold.js");

function run(...args) {
  const r = spawnSync(process.execPath, [cli, ...args], {encoding: "utf8", timeout: 300_000});
  return {status: r.status, stdout: r.stdout, stderr: r.stderr};
}

describe("layerfold validate", () => {
  const file = model("gemma-vocab", "gemma-vocab");

  test("tokenizes with the Gemma vocabulary, runs a two-node pipeline, agrees with llama.cpp", () => {
    const r = run("validate", "--model", file, "--nodes", "local:0-0,local:1-1", "--json");
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out.tokens, [2, 818, 5279, 529, 7001, 563]);
    assert.equal(out.synthetic, true);
    assert.equal(out.top.length, 5);
    assert.deepEqual(out.timings.nodes.map((n) => n.layers), [[0, 1], [1, 2]]);
    assert.ok(out.timings.nodes.every((n) => n.layerMs.length === 1 && n.layerMs[0] >= 0));
    assert.equal(out.llamaCpp.sameTop1, true);
    assert.ok(out.llamaCpp.maxLogProbDiff < 0.01);
  });

  test("a pipeline of nodes gives the same distribution as one node, bit for bit", () => {
    const one = JSON.parse(run("validate", "--model", file, "--json", "--top-k", "20").stdout);
    const two = JSON.parse(run("validate", "--model", file, "--nodes", "local:0-0,local:1-1", "--json", "--top-k", "20").stdout);
    assert.deepEqual(two.top, one.top);
  });

  test("the text report says the weights are synthetic", () => {
    const r = run("validate", "--model", file);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /SYNTHETIC weights/);
    assert.match(r.stdout, /llama\.cpp on the same file: top-1 agrees/);
  });

  for (const [what, args, reason] of [
    ["a gap between nodes", ["--nodes", "local:0-0"], /served by no node|has 2 layers/],
    ["overlapping nodes", ["--nodes", "local:0-1,local:1-1"], /overlap/],
    ["a malformed node", ["--nodes", "remote:0-1"], /bad node/],
    ["a missing model", ["--model", "/nonexistent/model.gguf"], /nonexistent/],
    ["a prompt longer than the context", ["--prompt", "word ".repeat(400)], /context|max_ctx|positions/],
  ]) {
    test(`${what}: exit 2 and a one-line reason`, () => {
      const r = run("validate", ...(args.includes("--model") ? [] : ["--model", file]), ...args);
      assert.equal(r.status, 2, r.stdout + r.stderr);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.match(r.stderr, reason);
    });
  }
});

describe("layerfold inspect", () => {
  test("lists per-layer tensors, types and bytes", () => {
    const r = run("inspect", model("tiny", "tiny", ["--type", "Q4_0"]), "--json");
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.architecture, "gemma4");
    assert.equal(out.layers.length, 2);
    assert.match(out.layers[0].tensors.attn_q, /^Q4_0 \[64, /);
    assert.equal(out.layers[1].tensors.attn_v, undefined);  // global layer: V = K
    assert.ok(out.layers.every((l) => l.bytes > 0));
  });
});
