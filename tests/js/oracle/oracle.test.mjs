// The external oracle: on synthetic gemma4 / gemma3 GGUFs our next-token distribution and greedy
// tokens, from the native build and the threaded WASM module, against llama.cpp's (node-llama-cpp
// 3.21.1) on the same file. The single-thread module and the relaxed-SIMD variants give the
// threaded SIMD128 module's bytes on these configs (tests/js/wasm/variants.test.mjs), so they
// are judged with it. Each config is judged by what llama.cpp runs for it on this host
// (tests/js/support/oracle_judge.mjs; docs/forward-pass.md, "Agreement"): where the engine mirrors its
// kernels, within 0.01 in ln p with the same greedy tokens on the config's prompt; elsewhere, over
// eight prompts, about as close to a float64 reference of the model as llama.cpp is.
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import path from "node:path";
import {after, before, describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {topK} from "../../../js-glue/src/tokens/logits.js";
import {F64Reference} from "../support/f64_reference.mjs";
import * as llama from "../support/llama_oracle.mjs";
import {model, root} from "../support/models.mjs";
import {nodeGreedy} from "../support/node_greedy.mjs";
import {CONFIGS, GREEDY_STEPS, prompt} from "../support/oracle_configs.mjs";
import {TOP_N, judge, llamaKernels, mirrors, modelTraits} from "../support/oracle_judge.mjs";

const lfRun = path.join(root, "build", "native", "lf_run");

// A config is run on prompt(n, seed); where it is judged against the f64 reference, on seven
// more seeds too (oracle_judge.mjs: a mean over eight prompts).
const SEEDS = [7, 1, 2, 4, 3, 5, 6, 8, 9];
const F64_PROMPTS = 8;

// The distribution is not flat: a comparison of a flat one would say little.
function checkNotFlat(theirs, what) {
  const top = topK(theirs, TOP_N);
  assert.ok(theirs[top[0]] - theirs[top[TOP_N - 1]] > 0.05, `${what}: distribution too flat to compare`);
}

function nativeRun(file, tokens) {
  const native = JSON.parse(execFileSync(lfRun, ["--model", file, "--tokens", tokens.join(","),
    "--logprobs", "--greedy", String(GREEDY_STEPS)], {encoding: "utf8", maxBuffer: 256 << 20}));
  return {logProbs: Float64Array.from(native.logprobs), greedy: native.greedy};
}

describe("next-token distribution matches llama.cpp", () => {
  let kernels;
  const measured = [];
  before(async () => {
    kernels = await llamaKernels();
    console.log(kernels.line);
  });
  after(() => console.log(`agreement per config and build: ${JSON.stringify(measured)}`));

  for (const config of CONFIGS) {
    test(config.name, {timeout: 600_000}, async (t) => {
      const file = model(config.name, config.preset, ["--type", config.type, ...(config.extra ?? [])]);
      const reference = F64Reference.open(file);
      t.after(() => reference.close());
      const mirrored = mirrors(kernels, modelTraits(reference, config.n));
      const first = config.seed ?? 7;
      const seeds = mirrored ? [first] : [first, ...SEEDS.filter((seed) => seed !== first)].slice(0, F64_PROMPTS);
      const handle = await llama.loadLlama(file, {threads: 2, contextSize: 256});
      t.after(() => llama.close(handle));
      const theirs = [];
      for (const seed of seeds) {
        const tokens = prompt(config.n, seed);
        theirs.push({label: seed, tokens, logProbs: await llama.nextTokenLogProbs(handle, tokens), greedy: await llama.greedy(handle, tokens, GREEDY_STEPS)});
      }
      checkNotFlat(theirs[0].logProbs, config.name);
      // The builds run the same prompts: the reference computes each once.
      const exactOf = new Map();
      const exact = (tokens) => {
        const key = tokens.join(",");
        if (!exactOf.has(key)) exactOf.set(key, reference.nextTokenLogProbs(tokens));
        return exactOf.get(key);
      };
      const judged = (build, ours) => judge({
        what: `${config.name} ${build}`, mirrored, handle, exact, record: (figures) => measured.push(figures),
        runs: theirs.map((r, i) => ({label: r.label, tokens: r.tokens, ours: ours[i], theirs: r})),
      });

      await judged("native", theirs.map((r) => nativeRun(file, r.tokens)));
      const node = await LayerNode.open({model: file, build: "threaded", threads: 2});
      try {
        const ours = [];
        for (const r of theirs) ours.push(await nodeGreedy(node, r.tokens, GREEDY_STEPS));
        await judged("wasm threaded", ours);
      } finally {
        node.close();
      }
    });
  }
});
