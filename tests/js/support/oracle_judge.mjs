// How a comparison with llama.cpp is judged on this host (docs/forward-pass.md, "What the engine
// computes"). llama.cpp's CPU backend is one of ggml's variants, chosen at load for the machine,
// and its roundings follow that variant's kernels; the engine computes what the x86 AVX-512
// builds compute. So each model and prompt is judged by the variant llama.cpp actually loaded:
//   - mirrored (mirrors()): max |Δ ln p| over llama.cpp's top 50 at most MIRRORED_BOUND on every
//     prompt, the same next token and the same greedy tokens;
//   - otherwise: our distance to a float64 reference of the same quantized model
//     (tests/js/support/f64_reference.mjs, independent of the engine), averaged over the prompts, at most
//     F64_SLACK times llama.cpp's; our next and greedy tokens parting from llama.cpp's only at a
//     near tie of its own.
import assert from "node:assert/strict";
import {createRequire} from "node:module";
import path from "node:path";

import {topK} from "../../../js-glue/src/tokens/logits.js";
import * as llama from "./llama_oracle.mjs";
import {root} from "./models.mjs";

export const TOP_N = 50;
// Where the arithmetic is the same, what is left is the last ulps of the logits and their ln: the
// mirrored cases measured 1e-7 to 1e-6.
export const MIRRORED_BOUND = 0.01;
// Both engines are the exact model plus their own rounding noise, amplified by the layers: one
// prompt's distance to the f64 reference is 0.001-0.07 for either, and the ratio of ours to
// llama.cpp's on one prompt ranged 0.76-1.63 where neither mirrors the other (llama.cpp's zen4
// build against us on the oracle's Q8_0, F16 and K-quant configs, docs/forward-pass.md). Means
// over eight prompts came to 0.95-1.17 of llama.cpp's, and llama.cpp's own AVX2 build to
// 0.88-1.14 of its AVX-512 build's over four: 1.25 admits that spread, while a real error (a
// wrong formula, an f32 accumulator where ggml keeps f16) moves ours 2-10x further.
export const F64_SLACK = 1.25;
// Greedy sequences may part only where llama.cpp's own top two are closer than twice its mean
// distance to the exact model: a near tie, which an engine as accurate as llama.cpp may order
// either way, as llama.cpp's own builds for two CPUs do.
export const NEAR_TIE_FACTOR = 2;

// ggml's x86 CPU variants (ggml/src/CMakeLists.txt, ggml_add_cpu_backend_variant) by what decides
// our agreement: AVX2 and FMA (Q4_0's fused block step in its repacked kernels), AVX-512 (the
// f16 dot's 4 x 16 lanes for an attention score), AMX (Q8_0's fused block step).
const AVX2 = ["haswell", "alderlake"];
const AVX512 = ["skylakex", "cannonlake", "cascadelake", "icelake", "cooperlake", "zen4"];
const AMX = ["sapphirerapids"];
// AVX512-BF16 (tinyBLAS's BF16 kernel: _mm512_dpbf16_ps), ggml/src/CMakeLists.txt's variants with it.
const AVX512_BF16 = ["cooperlake", "zen4", "sapphirerapids"];
const GGML_Q4_0 = 2, GGML_Q8_0 = 8;

/**
 * What llama.cpp runs on this host: {variant, avx2, avx512, amx, avx512bf16, line} (line: for the test log,
 * with scripts/cpu-class's description of the CPU).
 * @example const kernels = await llamaKernels(); kernels.variant // "zen4"
 */
export async function llamaKernels() {
  const variant = await llama.cpuBackend();
  const amx = AMX.includes(variant), avx512 = amx || AVX512.includes(variant);
  const avx2 = avx512 || AVX2.includes(variant);
  const {cpuClass} = createRequire(import.meta.url)(path.join(root, "scripts", "cpu-class"));
  return {variant, avx2, avx512, amx, avx512bf16: AVX512_BF16.includes(variant), line: `${cpuClass().line}; llama.cpp's CPU backend: ${variant}`};
}

/**
 * Whether llama.cpp with these kernels computes what we compute for a model whose matrices have
 * these ggml types and whose largest head dim is maxHeadDim, on a prompt of n tokens, with its KV
 * cache in cacheTypeK / cacheTypeV: its f16 dot sums a score in our lanes with AVX-512, and in
 * AVX2's from a head dim of 32 up (a quantized K's block dot in ours on every AVX2 build); its
 * Q4_0 kernels fuse the block step on every x86 with AVX2, its Q8_0 kernels only with AMX;
 * prompts of 64 rows and more take its tiled flash attention when K and V are both f16. F16,
 * BF16 and K-quant weights go through lanes we do not mirror.
 */
export function mirrors(kernels, {types, maxHeadDim, n, cacheTypeK = "f16", cacheTypeV = "f16"}) {
  const scoreLanes = cacheTypeK !== "f16" || kernels.avx512 || (kernels.avx2 && maxHeadDim < 32);
  const fused = [...types].every((t) => t === GGML_Q4_0 || (t === GGML_Q8_0 && kernels.amx));
  const oneChunk = n < 64 || cacheTypeK !== "f16" || cacheTypeV !== "f16";
  return kernels.avx2 && scoreLanes && fused && oneChunk;
}

/** The F64Reference's description of its model, as mirrors() takes it. */
export function modelTraits(reference, n) {
  const types = new Set([...reference.g.tensors.values()].filter((t) => t.ne.length >= 2).map((t) => t.type));
  return {types, maxHeadDim: Math.max(...reference.layers.map((l) => l.D)), n};
}

const maxDiff = (a, b, ids) => Math.max(...ids.map((id) => Math.abs(a[id] - b[id])));

/**
 * Judges one engine's runs against llama.cpp's on the same prompts, asserting with `what` in
 * every message. runs[i] = {label, tokens, ours: {logProbs, greedy}, theirs: {logProbs, greedy}};
 * exact(tokens) gives the f64 reference's ln p (only called when not mirrored); handle is
 * llama.cpp's model, for its ln p where greedy tokens part. The figures measured go to record()
 * before anything is asserted, so a failing case still shows them.
 * @example await judge({what: "tiny native", mirrored, runs, exact, handle, record: (f) => log.push(f)});
 */
export async function judge({what, mirrored, runs, exact, handle, record}) {
  for (const r of runs) r.toLlama = maxDiff(r.ours.logProbs, r.theirs.logProbs, topK(r.theirs.logProbs, TOP_N));
  const figures = {what, mirrored, maxToLlama: +Math.max(...runs.map((r) => r.toLlama)).toExponential(2)};
  let parted = [];
  if (!mirrored) {
    for (const r of runs) {
      const e = exact(r.tokens), top = topK(e, TOP_N);
      r.dOurs = maxDiff(r.ours.logProbs, e, top);
      r.dTheirs = maxDiff(r.theirs.logProbs, e, top);
    }
    const mean = (key) => runs.reduce((sum, r) => sum + r[key], 0) / runs.length;
    figures.f64MeanOurs = +mean("dOurs").toExponential(3);
    figures.f64MeanLlama = +mean("dTheirs").toExponential(3);
    parted = await partings(runs, handle);
    figures.parted = parted.map(({r, k, gap}) => ({prompt: r.label, step: k, gap: +gap.toExponential(2)}));
  }
  record(figures);

  if (mirrored) {
    for (const r of runs) {
      assert.equal(topK(r.ours.logProbs, 1)[0], topK(r.theirs.logProbs, 1)[0], `${what}, prompt ${r.label}: top-1 differs`);
      assert.ok(r.toLlama <= MIRRORED_BOUND,
        `${what}, prompt ${r.label}: max |Δ ln p| over llama.cpp's top ${TOP_N} is ${r.toLlama.toExponential(3)} > ${MIRRORED_BOUND} where we mirror its arithmetic`);
      // llama.cpp's greedy tokens stop at an end-of-generation token
      assert.deepEqual(r.ours.greedy.slice(0, r.theirs.greedy.length), r.theirs.greedy, `${what}, prompt ${r.label}: greedy tokens differ`);
    }
    return;
  }
  // The first greedy token is the top-1 of the distribution compared: a parting there is judged
  // as any other, a near tie of llama.cpp's own or a failure.
  const nearTie = NEAR_TIE_FACTOR * figures.f64MeanLlama;
  for (const {r, k, gap} of parted) {
    assert.ok(gap <= nearTie,
      `${what}, prompt ${r.label}: greedy tokens part at step ${k} (ours ${r.ours.greedy[k]}, llama.cpp ${r.theirs.greedy[k]}) with a gap of ${gap.toExponential(3)} in llama.cpp's ln p, not a near tie (<= ${nearTie.toExponential(3)})`);
  }
  assert.ok(figures.f64MeanOurs <= F64_SLACK * figures.f64MeanLlama,
    `${what}: mean distance to the f64 reference ${figures.f64MeanOurs.toExponential(3)} > ${F64_SLACK} × llama.cpp's ${figures.f64MeanLlama.toExponential(3)}`);
}

// Where each run's greedy tokens first part from llama.cpp's, with llama.cpp's ln p gap between
// its token and ours there.
async function partings(runs, handle) {
  const found = [];
  for (const r of runs) {
    const k = r.ours.greedy.findIndex((t, i) => i < r.theirs.greedy.length && t !== r.theirs.greedy[i]);
    if (k < 0) continue;
    const there = await llama.nextTokenLogProbs(handle, [...r.tokens, ...r.theirs.greedy.slice(0, k)]);
    found.push({r, k, gap: there[r.theirs.greedy[k]] - there[r.ours.greedy[k]]});
  }
  return found;
}
