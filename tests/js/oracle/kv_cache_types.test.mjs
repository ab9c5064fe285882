// The oracle with a quantized KV cache: next-token distributions and 16 greedy tokens of both
// WASM builds with K and V in q8_0 / q4_0 (and mixed with f16) against llama.cpp's with the same
// cache types (node-llama-cpp's experimentalKvCacheKeyType / ValueType), on prompts that wrap
// every sliding window many times: without the Hadamard rotation (a sliding head dim of 32),
// with it (128 / 64, and E2B's 256 / 512 shapes), and across shared-KV layers. Judged where the
// engine mirrors llama.cpp's kernels on this host (tests/js/support/oracle_judge.mjs); elsewhere
// skipped, the float64 reference holding no quantized cache to judge by.
import {after, before, describe, test} from "node:test";

import {LayerNode} from "../../../js-glue/src/node/layer_node.js";
import {F64Reference} from "../support/f64_reference.mjs";
import * as llama from "../support/llama_oracle.mjs";
import {model} from "../support/models.mjs";
import {nodeGreedy} from "../support/node_greedy.mjs";
import {judge, llamaKernels, mirrors, modelTraits} from "../support/oracle_judge.mjs";

const GREEDY_STEPS = 16;
const prompt = (n) => [2, ...Array.from({length: n - 1}, (_, i) => 10 + ((i * 37 + 77) % 500))];

// Windows of 4 (tiny presets) and 8: a prompt of 40 or 72 wraps them 5 to 10 times.
const CONFIGS = [
  {name: "tiny", preset: "tiny", extra: [], n: 40},
  {name: "tiny-rotated", preset: "tiny", extra: ["--head-dim-swa", "128", "--head-dim-global", "64"], n: 40},
  // A per-layer input of 64, not the preset's 32: with rows of one Q4_0 block (blk.N.proj is
  // [32 -> 64]) llama.cpp's sapphirerapids build computes the per-layer branch far from the float64 model
  // (docs/forward-pass.md, "Agreement"), and this test judges only where llama.cpp is exact.
  {name: "shared-kv2-q4", preset: "tiny-shared-kv2", extra: ["--n-embd-per-layer", "64"], n: 40},
  {name: "e2b-shape-w8", preset: "e2b-shape", extra: ["--sliding-window", "8"], n: 72},
  // A long prompt: 4096 positions through a window of 4 (a thousand wraps), the global layer's
  // cache 4096 rows deep, both rotated.
  {name: "tiny-rotated-4k", preset: "tiny", extra: ["--head-dim-swa", "128", "--head-dim-global", "64", "--ctx", "8192"], n: 4096},
];
const TYPES = [["q8_0", "q8_0"], ["q4_0", "q4_0"], ["q8_0", "f16"], ["f16", "q4_0"]];

describe("with a quantized KV cache, the next-token distribution matches llama.cpp's", () => {
  let kernels;
  const measured = [];
  before(async () => {
    kernels = await llamaKernels();
    console.log(kernels.line);
  });
  after(() => console.log(`agreement per config, cache types and build: ${JSON.stringify(measured)}`));

  for (const config of CONFIGS) {
    for (const [cacheTypeK, cacheTypeV] of TYPES) {
      const what = `${config.name}, K ${cacheTypeK}, V ${cacheTypeV}`;
      test(what, {timeout: 600_000}, async (t) => {
        const file = model(`${config.name}-q4_0`, config.preset, ["--type", "Q4_0", ...config.extra]);
        const reference = F64Reference.open(file);
        const traits = modelTraits(reference, config.n);
        reference.close();
        if (!mirrors(kernels, {...traits, cacheTypeK, cacheTypeV})) {
          t.skip(`llama.cpp's ${kernels.variant} kernels are not the engine's here`);
          return;
        }
        const tokens = prompt(config.n);
        const handle = await llama.loadLlama(file, {threads: 2, contextSize: Math.max(256, config.n + 2 * GREEDY_STEPS), cacheTypeK, cacheTypeV});
        t.after(() => llama.close(handle));
        const theirs = {logProbs: await llama.nextTokenLogProbs(handle, tokens), greedy: await llama.greedy(handle, tokens, GREEDY_STEPS)};
        for (const build of ["threaded", "single"]) {
          const node = await LayerNode.open({model: file, build, threads: 2, cacheTypeK, cacheTypeV});
          try {
            await judge({
              what: `${what}, wasm ${build}`, mirrored: true, handle, exact: null, record: (f) => measured.push(f),
              runs: [{label: config.n, tokens, ours: await nodeGreedy(node, tokens, GREEDY_STEPS), theirs}],
            });
          } finally {
            node.close();
          }
        }
      });
    }
  }
});
