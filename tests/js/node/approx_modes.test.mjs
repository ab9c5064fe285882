// Early exit and the top-K gate FFN through the JS API (docs/approximate.md): exact when set so
// that nothing may change, deterministic across threads and builds when on, the exit state
// carried from node to node locally and over HTTP, bad values refused by name, and reported by
// layerfold validate.
import assert from "node:assert/strict";
import {spawnSync} from "node:child_process";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {Pipeline} from "../../../js-glue/src/pipeline/pipeline.js";
import {model} from "../support/models.mjs";
import {cli, startServer, waitReady} from "../support/server_process.mjs";

const file = () => model("small-q4", "small", ["--type", "Q4_0"]);
const PROMPT = Array.from({length: 20}, (_, i) => 2 + ((i * 37) % 200));
const exitAfterFirstLayer = {earlyExit: true, exitThreshold: 1e30, exitWindow: 1};

// The prompt and two decode steps through every layer of one node: {bytes, stats of each call}.
async function run(options, approx) {
  const node = await LayerNode.open({model: file(), ...options});
  try {
    const outs = [];
    const stats = [];
    let pos = 0;
    for (const tokens of [PROMPT, [7], [9]]) {
      outs.push(await node.forward({session: "s", startPos: pos, hidden: node.embed(tokens), approx}));
      stats.push(node.approxStats("s"));
      pos += tokens.length;
    }
    return {bytes: Buffer.concat(outs.map((o) => Buffer.from(o.buffer))), stats, layers: node.layers};
  } finally {
    node.close();
  }
}

// Teacher-forced steps through a pipeline: every step's logits, and its timings' approx stats.
async function steps(nodes, approx, extra = {}) {
  const pipeline = await Pipeline.open({model: file(), nodes, build: "single", approx, ...extra});
  try {
    const logits = [];
    const stats = [];
    for (const tokens of [PROMPT, [7], [9], [11]]) {
      const r = await pipeline.step("a", tokens);
      logits.push(Buffer.from(r.logits.buffer));
      stats.push(r.timings.map((t) => t.approx));
    }
    return {bytes: Buffer.concat(logits), stats, replays: pipeline.replays};
  } finally {
    await pipeline.close();
  }
}

describe("early exit", () => {
  test("threshold 0 never exits: the exact bytes, with the updates measured", async () => {
    const exact = await run({build: "threaded", threads: 2});
    const never = await run({build: "threaded", threads: 2}, {earlyExit: true, exitThreshold: 0});
    assert.ok(never.bytes.equals(exact.bytes));
    for (const s of never.stats) {
      assert.equal(s.early_exit.exit_layer, -1);
      assert.equal(s.early_exit.layers_skipped, 0);
      assert.equal(s.early_exit.row_updates.length, never.layers[1] - never.layers[0]);
      assert.ok(s.early_exit.row_updates.every((u) => u > 0));
    }
  });

  test("on, the last row leaves after the first layer; the same bytes on every thread count and build", async () => {
    const exact = await run({build: "threaded", threads: 1});
    const runs = [
      await run({build: "threaded", threads: 1}, exitAfterFirstLayer),
      await run({build: "threaded", threads: 2}, exitAfterFirstLayer),
      await run({build: "single"}, exitAfterFirstLayer),
    ];
    for (const r of runs.slice(1)) {
      assert.ok(r.bytes.equals(runs[0].bytes));
      assert.deepEqual(r.stats, runs[0].stats);
    }
    assert.ok(!runs[0].bytes.equals(exact.bytes));
    const nLayers = runs[0].layers[1] - runs[0].layers[0];
    for (const s of runs[0].stats) {
      assert.equal(s.early_exit.exit_layer, runs[0].layers[0]);
      assert.equal(s.early_exit.layers_skipped, nLayers - 1);
    }
    // Only the last row exits: the prompt's other rows are the exact engine's.
    const rowBytes = (PROMPT.length - 1) * 4 * (runs[0].bytes.length / 4 / (PROMPT.length + 2));
    assert.ok(runs[0].bytes.subarray(0, rowBytes).equals(exact.bytes.subarray(0, rowBytes)));
  });

  test("the exit state crosses nodes, in process and over HTTP, replays included", async (t) => {
    const whole = await steps("local:0-5", exitAfterFirstLayer);
    const split = await steps("local:0-2,local:3-5", exitAfterFirstLayer);
    assert.ok(split.bytes.equals(whole.bytes));
    for (const [first, second] of split.stats) {
      assert.equal(first.early_exit.exit_layer, 0);
      assert.equal(second.early_exit.exit_layer, 0);  // arrived exited
      assert.equal(second.early_exit.layers_skipped, 3);
    }
    const server = await startServer(t, {args: ["--model", file(), "--layers", "3-5"]});
    const remote = await steps(`local:0-2,${server.url}`, exitAfterFirstLayer);
    assert.ok(remote.bytes.equals(whole.bytes));
    assert.deepEqual(remote.stats, split.stats);
    // Nodes that lose the session every step are rebuilt entry by entry, each with its exit.
    const evicting = await steps("local:0-2,local:3-5", exitAfterFirstLayer, {maxSessions: 1});
    assert.ok(evicting.bytes.equals(whole.bytes));
  });

  test("HTTP: bad values are refused by name", async (t) => {
    const server = await startServer(t, {args: ["--model", file(), "--layers", "0-5"]});
    await waitReady(server.url);
    const hidden = Buffer.alloc(4 * 256);  // one row of the small preset's n_embd
    const post = (query, headers = {}) => fetch(`${server.url}/v1/sessions/h/forward?start_pos=0&${query}`, {
      method: "POST", body: hidden, headers: {"content-type": "application/octet-stream", ...headers},
    });
    for (const [query, name] of [
      ["early_exit=2", "early_exit"], ["early_exit=1&exit_threshold=-1", "exit_threshold"],
      ["early_exit=1&exit_window=0", "exit_window"], ["early_exit=1&exit_window=1.5", "exit_window"],
      ["ffn_top_k=abc", "ffn_top_k"], ["ffn_top_k_threshold=2", "ffn_top_k_threshold"],
      ["ffn_top_k_layers=3", "ffn_top_k_layers"], ["ffn_top_k_layers=x:5", "ffn_top_k_layers"],
    ]) {
      const response = await post(query);
      assert.equal(response.status, 400, query);
      assert.match(await response.text(), new RegExp(name), query);
    }
    for (const state of ["{", "[1]", '{"exit_layer": "a"}', '{"recent_updates": [-1]}', '{"colour": 1}']) {
      const response = await post("early_exit=1&exit_threshold=1", {"x-layerfold-exit-state": state});
      assert.equal(response.status, 400, state);
      assert.match(await response.text(), /exit.state|exit_layer|recent_updates/, state);
    }
  });
});

describe("top-K gate FFN", () => {
  test("at full width the exact bytes; at half, the same bytes on every thread count and build", async (t) => {
    const exact = await run({build: "threaded", threads: 2});
    const full = await run({build: "threaded", threads: 2}, {ffnTopK: 1, ffnTopKThreshold: 1});
    assert.ok(full.bytes.equals(exact.bytes));
    assert.equal(full.stats[0].ffn_top_k.features_skipped, 0);
    assert.ok(full.stats[0].ffn_top_k.rows > 0);
    const half = {ffnTopK: 0.5, ffnTopKThreshold: 1};
    const runs = [await run({build: "threaded", threads: 1}, half), await run({build: "threaded", threads: 2}, half), await run({build: "single"}, half)];
    for (const r of runs.slice(1)) {
      assert.ok(r.bytes.equals(runs[0].bytes));
      assert.deepEqual(r.stats, runs[0].stats);
    }
    assert.ok(!runs[0].bytes.equals(exact.bytes));
    const s = runs[0].stats[0].ffn_top_k;
    assert.equal(s.features_skipped, 0.5);
    assert.ok(s.max_dropped_gate_mass > 0 && s.max_dropped_gate_mass < 0.5);
    // Per-layer K over the fraction, and the same over HTTP as in process.
    const perLayer = {ffnTopK: 0.5, ffnTopKLayers: {0: 1, 1: 1}, ffnTopKThreshold: 1};
    const local = await steps("local:0-2,local:3-5", perLayer);
    const server = await startServer(t, {args: ["--model", file(), "--layers", "3-5"]});
    const remote = await steps(`local:0-2,${server.url}`, perLayer);
    assert.ok(remote.bytes.equals(local.bytes));
    assert.deepEqual(remote.stats, local.stats);
    const [first] = local.stats[0];
    assert.ok(first.ffn_top_k.features_skipped > 0 && first.ffn_top_k.features_skipped < 0.5);  // layers 0, 1 dense
  });

  test("bad options are refused by name and create no session (a refused call changes nothing)", async () => {
    const node = await LayerNode.open({model: file(), build: "single"});
    try {
      const hidden = node.embed(PROMPT);
      for (const [approx, name] of [[{ffnTopK: -1}, "ffn_top_k"], [{ffnTopKThreshold: 1.5}, "ffn_top_k_threshold"],
        [{ffnTopKLayers: {a: 1}}, "ffn_top_k_layers"], [{exitWindow: 17}, "exit_window"], [{earlyExit: 1}, "early_exit"]]) {
        await assert.rejects(node.forward({session: "s", startPos: 0, hidden, approx}), new RegExp(name));
        assert.equal(node.sessionLength("s"), null);
      }
      await assert.rejects(node.forward({session: "s", startPos: 0, hidden, exitState: {exit_layer: -2}}), /exit_layer/);
      assert.equal(node.sessionLength("s"), null);
      assert.equal(node.info().sessions, 0);
    } finally {
      node.close();
    }
  });
});

test("layerfold validate reports each mode; their flags need their switch, and a bad value is refused by name", () => {
  const validate = (...args) => spawnSync(process.execPath, [cli, "validate", "--model", file(), "--threads", "1", ...args], {encoding: "utf8"});
  const exact = JSON.parse(validate("--json").stdout);
  const never = JSON.parse(validate("--json", "--early-exit", "--exit-threshold", "0", "--ffn-top-k", "1").stdout);
  assert.deepEqual(never.top, exact.top);
  const on = validate("--early-exit", "--exit-threshold", "1e30", "--exit-window", "1", "--ffn-top-k", "0.5", "--ffn-top-k-threshold", "1");
  assert.equal(on.stderr, "");
  assert.match(on.stdout, /approximate: top-K FFN, 50% of up\/down features skipped, max dropped gate mass [0-9.e+-]+ \(\d+ of \d+ rows top-K, 0 ran dense\)/);
  assert.match(on.stdout, /approximate: early exit after layer 0 of 6 \(5 layers skipped for the last token\)/);
  for (const [args, message] of [[["--exit-threshold", "1"], /--exit-threshold needs --early-exit/],
    [["--early-exit"], /--early-exit needs --exit-threshold/], [["--ffn-top-k-threshold", "0.1"], /--ffn-top-k-threshold needs --ffn-top-k/],
    [["--ffn-top-k", "x"], /--ffn-top-k must be a number from 0 to .*, got "x"/], [["--ffn-top-k-layers", "3"], /--ffn-top-k-layers 3: expected LAYER:K/]]) {
    const bad = validate(...args);
    assert.equal(bad.status, 2, args.join(" "));
    assert.match(bad.stderr, message);
  }
});

describe("approximate modes on mixture-of-experts layers", () => {
  const moeFile = () => model("moe-tiny", "moe-tiny", ["--type", "Q4_0"]);

  test("the top-K gate FFN is refused there by name; truncated attention runs and stays exact when lossless", async () => {
    for (const build of ["threaded", "single"]) {
      const node = await LayerNode.open({model: moeFile(), build, threads: 2});
      try {
        const hidden = node.embed(PROMPT.map((t) => t % 1000));
        await assert.rejects(node.forward({session: "k", startPos: 0, hidden, approx: {ffnTopK: 0.5}}),
          (e) => e.code === "unsupported" && /top-K gate FFN is not supported on mixture-of-experts layers/.test(e.message));
        const exact = await node.forward({session: "a", startPos: 0, hidden});
        // A threshold no score reaches keeps every key: the exact bytes.
        const truncated = await node.forward({session: "b", startPos: 0, hidden,
          approx: {truncatedAttention: true, truncationThreshold: 0}});
        assert.deepEqual(Buffer.from(truncated.buffer), Buffer.from(exact.buffer), `${build}: truncated attention changed the bytes`);
      } finally {
        node.close();
      }
    }
  });
});
