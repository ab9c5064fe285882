// The approximate modes' options in their three spellings (js-glue/src/protocol/approx_options.js)
// and their one check, the engine's: the JS API's object goes to the HTTP query and back
// unchanged, the engine's JSON keys are the query's names, and a value or key the engine refuses
// is a 400 naming the option, from the engine's own message (JS checks neither keys nor ranges).
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {approxFromQuery, approxModesOn, approxQuery, engineApprox} from "../../../js-glue/src/protocol/approx_options.js";
import {createLayerNodeApp} from "../../../js-glue/src/server/app.js";
import {model} from "../support/models.mjs";

const ALL = {
  truncatedAttention: true, truncationThreshold: 0.25, earlyExit: false, exitThreshold: 1e-7, exitWindow: 3,
  ffnTopK: 0.5, ffnTopKThreshold: 0.125, ffnTopKLayers: {3: 8192, 12: 0.75},
};

describe("spelling", () => {
  test("the query spells each option under the engine's key; decoding gives the object back", () => {
    const pairs = approxQuery(ALL);
    assert.deepEqual(pairs, [
      ["truncated_attention", "1"], ["truncation_threshold", "0.25"], ["early_exit", "0"], ["exit_threshold", "1e-7"],
      ["exit_window", "3"], ["ffn_top_k", "0.5"], ["ffn_top_k_threshold", "0.125"], ["ffn_top_k_layers", "3:8192,12:0.75"],
    ]);
    assert.deepEqual(approxFromQuery(pairs), ALL);
    // As a URL's query string, too.
    assert.deepEqual(approxFromQuery(new URLSearchParams(pairs)), ALL);
  });

  test("the engine's JSON: the same keys as the query, the values as given", () => {
    assert.deepEqual(engineApprox(ALL), {
      truncated_attention: true, truncation_threshold: 0.25, early_exit: false, exit_threshold: 1e-7, exit_window: 3,
      ffn_top_k: 0.5, ffn_top_k_threshold: 0.125, ffn_top_k_layers: {3: 8192, 12: 0.75},
    });
    assert.deepEqual(engineApprox({}), {});
  });

  test("values it cannot read go on as text, unknown keys under their own name: the engine judges them", () => {
    assert.deepEqual(approxFromQuery([["early_exit", "yes"], ["exit_window", "1.5"], ["ffn_top_k", "abc"], ["ffn_top_k_layers", "x:5,4:-1"], ["ffn_topk", "2"]]),
      {earlyExit: "yes", exitWindow: 1.5, ffnTopK: "abc", ffnTopKLayers: {x: 5, 4: -1}, ffnTopk: 2});
    assert.deepEqual(approxQuery({ffnTopK: "abc", exitThreshold: -1}), [["ffn_top_k", "abc"], ["exit_threshold", "-1"]]);
    assert.deepEqual(engineApprox({ffnTopk: 2}), {ffn_topk: 2});
  });

  test("a layer list that is not LAYER:K,... is refused naming the option as its caller spells it", () => {
    for (const text of ["3", "3:1:2", "3:1,,4:2"]) {
      assert.throws(() => approxFromQuery([["ffn_top_k_layers", text]]),
        (error) => error.code === "invalid_argument" && error.message === `ffn_top_k_layers ${text}: expected LAYER:K,LAYER:K...`);
    }
    assert.throws(() => approxFromQuery([["ffn_top_k_layers", "3"]], (name) => `--${name.replaceAll("_", "-")}`),
      (error) => error.message.startsWith("--ffn-top-k-layers 3: expected"));
    assert.deepEqual(approxFromQuery([["ffn_top_k_layers", ""]]), {ffnTopKLayers: {}});
  });

  test("approxModesOn: a mode switched on, not its thresholds", () => {
    assert.equal(approxModesOn({}), false);
    assert.equal(approxModesOn({truncationThreshold: 0.5, exitWindow: 4, ffnTopKLayers: {}}), false);
    for (const on of [{truncatedAttention: true}, {earlyExit: true}, {ffnTopK: 0.5}, {ffnTopKLayers: {1: 3}}]) assert.equal(approxModesOn(on), true);
  });
});

describe("checked once, by the engine: a bad option is a 400 naming it", () => {
  test("each refusal carries the engine's message and leaves no session behind", async () => {
    const node = await LayerNode.open({model: model("tiny", "tiny", ["--type", "Q4_0"]), threads: 1});
    try {
      const app = createLayerNodeApp({node});
      const forward = (query) => app.fetch(new Request(`http://node/v1/sessions/s/forward?start_pos=0&${query}`, {
        method: "POST", headers: {"content-type": "application/octet-stream"}, body: Buffer.from(node.embed([2, 3]).buffer),
      }));
      for (const [query, message] of [
        ["exit_window=20", "approximate options: exit_window must be an integer in [1, 16], got 20"],
        ["truncation_threshold=1.5", "approximate options: truncation_threshold must be a number in [0, 1], got 1.5"],
        ["early_exit=yes", 'approximate options: early_exit must be true or false, got "yes"'],
        ["ffn_top_k=abc", 'approximate options: ffn_top_k must be a number >= 0 (a fraction up to 1, a count above), got "abc"'],
        ["ffn_top_k_layers=2:-1", "approximate options: ffn_top_k_layers.2 must be a number >= 0, got -1"],
        ["ffn_topk=0.5", 'approximate options: unknown key "ffn_topk"'],
      ]) {
        const response = await forward(query);
        assert.equal(response.status, 400, query);
        const {error} = await response.json();
        assert.equal(error.code, "bad_parameter", query);
        assert.ok(error.message.startsWith(message), `${query}: ${error.message}`);
      }
      const syntax = await forward("ffn_top_k_layers=2");
      assert.equal(syntax.status, 400);
      assert.match((await syntax.json()).error.message, /^ffn_top_k_layers 2: expected LAYER:K/);
      assert.equal(node.sessionLength("s"), null);
      // The same options, well-formed, run.
      assert.equal((await forward("early_exit=1&exit_threshold=0&exit_window=16")).status, 200);
    } finally {
      node.close();
    }
  });
});
