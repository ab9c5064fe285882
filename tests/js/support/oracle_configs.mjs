// The models and prompts the llama.cpp oracle judges (tests/js/oracle/oracle.test.mjs), which
// the module variants must also give the same bytes on (tests/js/wasm/variants.test.mjs).
// A config is model(name, preset, ["--type", type, ...extra]) run on prompt(n, seed ?? 7),
// then GREEDY_STEPS greedy tokens.

export const GREEDY_STEPS = 16;

/** A prompt: BOS then arbitrary ids, some longer than every sliding window involved. */
export const prompt = (n, seed = 7) => [2, ...Array.from({length: n - 1}, (_, i) => 10 + ((i * 37 + seed * 11) % 500))];

export const CONFIGS = [
  {name: "tiny", preset: "tiny", type: "Q4_0", n: 9},
  {name: "tiny-q8", preset: "tiny", type: "Q8_0", n: 9},
  {name: "tiny-gemma3", preset: "tiny-gemma3", type: "Q4_0", n: 11},
  {name: "small-q8", preset: "small", type: "Q8_0", n: 40},
  // One KV head everywhere, three query heads, an untied output matrix that makes the layers
  // decide the answer, and a prompt three windows long.
  {name: "odd-heads-untied", preset: "tiny", type: "Q8_0",
   extra: ["--n-head", "3", "--n-head-kv-swa", "1", "--n-head-kv-global", "1", "--untied-output"], n: 13},
  {name: "gemma3-untied", preset: "tiny-gemma3", type: "F16", extra: ["--untied-output"], n: 10},
  {name: "31b-shape", preset: "31b-shape", type: "Q4_0", n: 6},
  // Gemma 4 E2B/E4B features: per-layer embeddings, shared-KV layers (one, and two of both
  // kinds), per-layer FFN widths; prompts past the window, so the shared sliding layer's mask
  // and its source's cache matter.
  {name: "shared-kv1", preset: "tiny-shared-kv1", type: "Q8_0", n: 11},
  {name: "shared-kv2", preset: "tiny-shared-kv2", type: "Q8_0", n: 13},
  {name: "shared-kv2-untied", preset: "tiny-shared-kv2", type: "F16", extra: ["--untied-output"], n: 12, seed: 3},
  {name: "e2b-shape", preset: "e2b-shape", type: "Q8_0", n: 20},
  // Mixture of experts (measured 3e-7 to 2e-3): fused gate/up with the per-expert down scale,
  // top-3 of 7; separate gate/up, top-1 of 5, in Q8_0 and F16; 20 experts, top-6, three
  // layers; and the gemma-4-26B-A4B layer shapes (128 experts of width 704, 8 used).
  {name: "moe-tiny", preset: "moe-tiny", type: "Q4_0", n: 9},
  {name: "moe-top1-q8", preset: "moe-top1", type: "Q8_0", n: 9},
  {name: "moe-top1-f16", preset: "moe-top1", type: "F16", n: 7},
  {name: "moe-wide", preset: "moe-wide", type: "Q4_0", n: 12},
  {name: "26b-a4b-shape", preset: "26b-a4b-shape", type: "Q4_0", n: 6},
  // Mixed K-quant files (docs/forward-pass.md, "K-quant files"): dense Q4_K / Q5_K / Q6_K / Q8_0;
  // K-quant experts (gate Q4_K, up Q5_K, down Q6_K) beside a Q8_0 shared MLP; and the 26B-A4B
  // shapes in a dynamic-quant mix (Q4_K/Q5_K fused gate/up, Q8_0 down experts). The presets fix
  // each tensor's type; --type sets the rest.
  {name: "tiny-kquant", preset: "tiny-kquant", type: "Q4_K", n: 9},
  {name: "moe-kquant", preset: "moe-kquant", type: "Q5_K", n: 9},
  {name: "26b-a4b-mixed", preset: "26b-a4b-mixed", type: "Q4_K", n: 6},
];
