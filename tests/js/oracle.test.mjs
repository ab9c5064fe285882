// The external oracle: on synthetic gemma4 / gemma3 GGUFs our next-token distribution
// must match llama.cpp's (node-llama-cpp 3.21.1) on the same file, for the native build and for
// both WASM builds. See docs/forward-pass.md for why the tolerance is what it is.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import path from "node:path";
import {after, describe, test} from "node:test";

import {LayerNode} from "../../js-glue/src/node/layer_node.js";
import {logSoftmax, topK} from "../../js-glue/src/tokens/logits.js";
import * as llama from "./llama_oracle.mjs";
import {model, root} from "./models.mjs";

// |ln p_ours − ln p_llama.cpp| over llama.cpp's 50 most likely tokens must stay under 0.01
// (measured on these configs: 1e-7 to 6e-3; docs/forward-pass.md, "Agreement").
const MAX_LOGPROB_DIFF = 0.01;
const TOP_N = 50;
const GREEDY_STEPS = 16;
const lfRun = path.join(root, "build", "native", "lf_run");

// Prompts: BOS then arbitrary ids, some longer than every sliding window involved.
const prompt = (n, seed = 7) => [2, ...Array.from({length: n - 1}, (_, i) => 10 + ((i * 37 + seed * 11) % 500))];

const CONFIGS = [
  {name: "tiny", preset: "tiny", type: "Q4_0", tokens: prompt(9)},
  {name: "tiny-q8", preset: "tiny", type: "Q8_0", tokens: prompt(9)},
  {name: "tiny-gemma3", preset: "tiny-gemma3", type: "Q4_0", tokens: prompt(11)},
  {name: "small-q8", preset: "small", type: "Q8_0", tokens: prompt(40)},
  // One KV head everywhere, three query heads, an untied output matrix that makes the layers
  // decide the answer, and a prompt three windows long.
  {name: "odd-heads-untied", preset: "tiny", type: "Q8_0",
   extra: ["--n-head", "3", "--n-head-kv-swa", "1", "--n-head-kv-global", "1", "--untied-output"], tokens: prompt(13)},
  {name: "gemma3-untied", preset: "tiny-gemma3", type: "F16", extra: ["--untied-output"], tokens: prompt(10)},
  {name: "31b-shape", preset: "31b-shape", type: "Q4_0", tokens: prompt(6), slow: true},
  // Gemma 4 E2B/E4B features: per-layer embeddings, shared-KV layers (one, and two of both
  // kinds), per-layer FFN widths; prompts past the window, so the shared sliding layer's mask
  // and its source's cache matter.
  {name: "shared-kv1", preset: "tiny-shared-kv1", type: "Q8_0", tokens: prompt(11)},
  {name: "shared-kv2", preset: "tiny-shared-kv2", type: "Q8_0", tokens: prompt(13)},
  {name: "shared-kv2-untied", preset: "tiny-shared-kv2", type: "F16", extra: ["--untied-output"], tokens: prompt(12, 3)},
  {name: "e2b-shape", preset: "e2b-shape", type: "Q8_0", tokens: prompt(20)},
  // Mixture of experts (measured 3e-7 to 2e-3): fused gate/up with the per-expert down scale,
  // top-3 of 7; separate gate/up, top-1 of 5, in Q8_0 and F16; 20 experts, top-6, three
  // layers; and the gemma-4-26B-A4B layer shapes (128 experts of width 704, 8 used).
  {name: "moe-tiny", preset: "moe-tiny", type: "Q4_0", tokens: prompt(9)},
  {name: "moe-top1-q8", preset: "moe-top1", type: "Q8_0", tokens: prompt(9)},
  {name: "moe-top1-f16", preset: "moe-top1", type: "F16", tokens: prompt(7)},
  {name: "moe-wide", preset: "moe-wide", type: "Q4_0", tokens: prompt(12)},
  {name: "26b-a4b-shape", preset: "26b-a4b-shape", type: "Q4_0", tokens: prompt(6), slow: true},
  // Mixed K-quant files (docs/forward-pass.md, "K-quant files"): dense Q4_K / Q5_K / Q6_K / Q8_0;
  // K-quant experts (gate Q4_K, up Q5_K, down Q6_K) beside a Q8_0 shared MLP; and the 26B-A4B
  // shapes in a dynamic-quant mix (Q4_K/Q5_K fused gate/up, Q8_0 down experts). The presets fix
  // each tensor's type; --type sets the rest.
  {name: "tiny-kquant", preset: "tiny-kquant", type: "Q4_K", tokens: prompt(9)},
  {name: "moe-kquant", preset: "moe-kquant", type: "Q5_K", tokens: prompt(9)},
  {name: "26b-a4b-mixed", preset: "26b-a4b-mixed", type: "Q4_K", tokens: prompt(6)},
];

function compare(ours, theirs, what) {
  const top = topK(theirs, TOP_N);
  assert.equal(topK(ours, 1)[0], top[0], `${what}: top-1 differs`);
  let worst = 0;
  for (const id of top) worst = Math.max(worst, Math.abs(ours[id] - theirs[id]));
  assert.ok(worst <= MAX_LOGPROB_DIFF, `${what}: max |Δ ln p| over llama.cpp's top ${TOP_N} is ${worst.toExponential(3)} > ${MAX_LOGPROB_DIFF}`);
  // Not a flat distribution: the comparison would say little.
  assert.ok(theirs[top[0]] - theirs[top[TOP_N - 1]] > 0.05, `${what}: distribution too flat to compare`);
  return worst;
}

// Our greedy tokens against llama.cpp's: the same, step for step.
function compareGreedy(ours, theirGreedy, what) {
  assert.deepEqual(ours, theirGreedy, `${what}: greedy tokens differ`);
}

// Greedy continuation through a LayerNode (embed -> forward -> logits per step); a model with
// per-layer embeddings gets their inputs with each forward.
async function wasmRun(node, tokens, steps) {
  const session = `s${Math.random()}`;
  const forward = async (startPos, ids) => {
    const hidden = node.embed(ids);
    const perLayer = node.nEmbdPerLayer > 0 ? await node.perLayerInputs(ids, hidden) : null;
    return node.forward({session, startPos, hidden, lastOnly: true, perLayer});
  };
  let hidden = await forward(0, tokens);
  const first = logSoftmax(node.logits(hidden));
  const generated = [topK(first, 1)[0]];
  let pos = tokens.length;
  while (generated.length < steps) {
    hidden = await forward(pos++, [generated.at(-1)]);
    const logits = node.logits(hidden);
    generated.push(topK(logits, 1)[0]);
  }
  node.dropSession(session);
  return {logProbs: first, greedy: generated};
}

describe("next-token distribution matches llama.cpp", () => {
  const measured = [];
  after(() => console.log(`max |Δ ln p| per config: ${JSON.stringify(measured)}`));

  for (const config of CONFIGS) {
    test(config.name, {timeout: 600_000}, async (t) => {
      const file = model(config.name, config.preset, ["--type", config.type, ...(config.extra ?? [])]);
      const handle = await llama.loadLlama(file, {threads: 2, contextSize: 256});
      t.after(() => llama.close(handle));
      const theirs = await llama.nextTokenLogProbs(handle, config.tokens);
      const theirGreedy = await llama.greedy(handle, config.tokens, GREEDY_STEPS);

      const native = JSON.parse(execFileSync(lfRun, ["--model", file, "--tokens", config.tokens.join(","),
        "--logprobs", "--greedy", String(GREEDY_STEPS)], {encoding: "utf8", maxBuffer: 256 << 20}));
      const worstNative = compare(Float64Array.from(native.logprobs), theirs, `${config.name} native`);
      compareGreedy(native.greedy, theirGreedy, `${config.name} native`);

      const builds = config.slow ? ["threaded"] : ["threaded", "single"];
      const worst = {native: worstNative};
      for (const build of builds) {
        const node = await LayerNode.open({model: file, build, threads: 2});
        try {
          const run = await wasmRun(node, config.tokens, GREEDY_STEPS);
          worst[build] = compare(run.logProbs, theirs, `${config.name} wasm ${build}`);
          compareGreedy(run.greedy, theirGreedy, `${config.name} wasm ${build}`);
        } finally {
          node.close();
        }
      }
      measured.push({config: config.name, ...Object.fromEntries(Object.entries(worst).map(([k, v]) => [k, +v.toExponential(2)]))});
    });
  }
});
