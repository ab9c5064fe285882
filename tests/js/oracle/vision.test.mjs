// Gemma 4's vision tower against llama.cpp's (docs/vision.md, "Agreement"): synthetic projectors
// (make-model --mmproj), images of odd sizes, a tiny one and one past the token budget, through
// the native build (lf_vision, 1 to 3 threads) and mtmd (support/llama_vision.mjs). The
// preprocessed size and the soft-token count must be llama.cpp's exactly; the embeddings of an F16
// tower equal bit for bit where llama.cpp runs its AVX-512 kernels (whose sums the tower mirrors),
// of a BF16 one where they have AVX512-BF16, and elsewhere, or for Q8_0 matrices (not mirrored),
// within the projector's bound of its largest |value|; our bytes the same at every thread count.
import assert from "node:assert/strict";
import {describe, test} from "node:test";

import {llamaVision, lfVisionRun, rgbImage} from "../support/llama_vision.mjs";
import {model} from "../support/models.mjs";
import {llamaKernels} from "../support/oracle_judge.mjs";

// The largest |ours - llama.cpp's| over the largest |llama.cpp's|, per image, where the tower's
// sums are not llama.cpp's: bounds about three times what AVX2 hosts and Q8_0 matrices measured
// (docs/vision.md, "Agreement"); `mirrored` names the llamaKernels() flag under which they are
// llama.cpp's bit for bit. The E2B-width tower (2 of its 16 layers) and the 31B-width one (1 of
// 27: heads of 72, so llama.cpp's one-chunk attention) run one small image each: an 896 x 896
// encode takes seconds natively.
const PROJECTORS = [
  {name: "mmproj-tiny", preset: "tiny", extra: ["--mmproj", "--vision-tower", "tiny"], bound: 2e-3, mirrored: "avx512"},
  {name: "mmproj-tiny-bf16", preset: "tiny", extra: ["--mmproj", "--vision-tower", "tiny", "--vision-type", "BF16"], bound: 1e-2, mirrored: "avx512bf16"},
  {name: "mmproj-tiny-q8", preset: "tiny", extra: ["--mmproj", "--vision-tower", "tiny", "--vision-type", "Q8_0", "--seed", "5"], bound: 3e-2, mirrored: null},
  {name: "mmproj-e2b-2", preset: "e2b-shape", extra: ["--mmproj", "--vision-tower", "e2b", "--vision-layers", "2"], bound: 5e-3, mirrored: "avx512"},
  {name: "mmproj-31b-1", preset: "31b-shape", extra: ["--mmproj", "--vision-tower", "31b", "--vision-layers", "1"], bound: 5e-3, mirrored: "avx512"},
];

// [width, height, max tokens (0: the model's 1120)]
const IMAGES = [[37, 23, 0], [3, 2, 0], [200, 120, 80], [1000, 700, 90]];

function relativeError(ours, ref) {
  let diff = 0, scale = 0;
  for (let i = 0; i < ref.length; i++) {
    diff = Math.max(diff, Math.abs(ours[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return diff / scale;
}

describe("vision tower vs llama.cpp", () => {
  for (const p of PROJECTORS) {
    const small = p.name.startsWith("mmproj-tiny");
    for (const [w, h, maxTokens] of small ? IMAGES : IMAGES.slice(2, 3)) {
      test(`${p.name} ${w}x${h}${maxTokens ? ` max ${maxTokens}` : ""}`, async () => {
        const mmproj = model(p.name, p.preset, p.extra);
        const image = rgbImage(w, h);
        const ref = await llamaVision(mmproj, image, w, h, {maxTokens: maxTokens || -1});
        const runs = [1, 2, 3].map((threads) => lfVisionRun(mmproj, image, w, h, {threads, maxTokens}));
        const ours = runs[0];
        assert.deepEqual([ours.width, ours.height, ours.n_tokens, ours.n_embd], [ref.width, ref.height, ref.n_tokens, ref.n_embd]);
        assert.equal(ours.embd.length, ref.embd.length);
        const err = relativeError(ours.embd, ref.embd);
        console.log(`${p.name} ${w}x${h}: ${ref.width}x${ref.height}, ${ref.n_tokens} tokens, relative error ${err.toExponential(2)}`);
        const bound = p.mirrored && (await llamaKernels())[p.mirrored] ? 0 : p.bound;
        assert.ok(err <= bound, `relative error ${err} over ${bound}`);
        for (const r of runs.slice(1)) assert.equal(r.raw, ours.raw, "bytes differ across thread counts");
      });
    }
  }
});
